import type { Percentiles } from "./stats.js";

export function number(n: number, digits = 0): string {
  return n.toLocaleString("en-US", {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

export function ratio(n: number): string {
  return `${number(n, 2)}×`;
}

export function percent(share: number): string {
  return `${number(100 * share)}%`;
}

/** A markdown table. */
export function table(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

export const PERCENTILES = ["p50", "p90", "p99", "p99.9", "max"];

export function percentileCells(p: Percentiles, scale = 1): string[] {
  const digits = scale === 1 ? 0 : 1;
  return [p.p50, p.p90, p.p99, p.p999, p.max].map((v) => number(v / scale, digits));
}
