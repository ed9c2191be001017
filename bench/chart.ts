import { CEILING_SCRIPTS, summarizeCeiling, type CeilingScript } from "./ceiling.js";
import { ROUND_TRIP, VARIANTS, type LatencyResult } from "./heartbeat.js";
import { headline, SCRIPT_LABEL, type Results } from "./report.js";
import { best, ceilingOf } from "./targets.js";

const WIDTH = 820;
const LABEL_WIDTH = 200;
const PLOT_WIDTH = 480;
const BAR = 18;
const GAP = 6;

const COLOR: Record<LatencyResult["variant"] | "ceiling", string> = {
  rollcall: "#2563eb",
  naive: "#ea580c",
  multi: "#a855f7",
  [ROUND_TRIP]: "#9ca3af",
  ceiling: "#6b7280",
};

const SCRIPT_COLOR: Record<CeilingScript, string> = {
  noop: COLOR[ROUND_TRIP],
  naive: COLOR.naive,
  rollcall: COLOR.rollcall,
};

const NAME: Record<LatencyResult["variant"], string> = {
  rollcall: "rollcall",
  naive: "baseline",
  multi: "baseline MULTI/EXEC",
  [ROUND_TRIP]: "one round trip (PING)",
};

interface Bar {
  label: string;
  value: number;
  color: string;
  text: string;
}

interface Group {
  name: string;
  bars: Bar[];
}

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function text(x: number, y: number, content: string, attributes = ""): string {
  return `<text x="${x}" y="${y}" ${attributes}>${escape(content)}</text>`;
}

type Scale = "linear" | "log";

/** Maps values to bar lengths; a log scale gets a labelled line at every power of ten. */
function axis(values: number[], scale: Scale): { length: (v: number) => number; grid: number[] } {
  const max = Math.max(...values);
  if (scale === "linear") return { length: (v) => (v / max) * PLOT_WIDTH, grid: [] };
  const lo = Math.floor(Math.log10(Math.max(1, Math.min(...values))));
  const hi = Math.ceil(Math.log10(max));
  const span = Math.max(1, hi - lo);
  const grid = Array.from({ length: span + 1 }, (_, i) => 10 ** (lo + i));
  return { length: (v) => ((Math.log10(Math.max(v, 1)) - lo) / span) * PLOT_WIDTH, grid };
}

/** A titled panel of horizontal bars, in groups; returns its SVG and its height. */
function panel(title: string, top: number, groups: Group[], scale: Scale): [string, number] {
  const { length, grid } = axis(
    groups.flatMap((g) => g.bars.map((b) => b.value)),
    scale,
  );
  const parts = [text(20, top + 16, title, 'font-size="15" font-weight="bold"')];
  let y = top + 32;
  for (const value of grid) {
    parts.push(
      text(LABEL_WIDTH + length(value), y - 4, `${value}`, 'text-anchor="middle" fill="#555"'),
    );
  }
  const barsTop = y;
  for (const group of groups) {
    if (group.name) parts.push(text(20, y + BAR - 4, group.name, 'font-weight="bold"'));
    for (const bar of group.bars) {
      const width = Math.max(1, length(bar.value));
      parts.push(
        text(LABEL_WIDTH - 8, y + BAR - 5, bar.label, 'text-anchor="end"'),
        `<rect x="${LABEL_WIDTH}" y="${y}" width="${width.toFixed(1)}" height="${BAR}" fill="${bar.color}"/>`,
        text(LABEL_WIDTH + width + 6, y + BAR - 5, bar.text),
      );
      y += BAR + GAP;
    }
    y += GAP * 2;
  }
  for (const value of grid) {
    const x = (LABEL_WIDTH + length(value)).toFixed(1);
    parts.push(
      `<line x1="${x}" y1="${barsTop}" x2="${x}" y2="${y}" stroke="#999" stroke-dasharray="2,3"/>`,
    );
  }
  return [parts.join("\n"), y - top];
}

function whole(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

/** Throughput bars, latency percentiles, Redis time per call and memory, as plain SVG text. */
export function chart(r: Results): string {
  const ceiling = ceilingOf(r.heartbeat);
  const [throughput, throughputHeight] = panel(
    "Heartbeats per second, best configuration (more is better)",
    50,
    [
      {
        name: "",
        bars: [
          ...VARIANTS.map((v) => {
            const run = best(r.heartbeat.throughput, v);
            return {
              label: NAME[v],
              value: run.opsPerSec,
              color: COLOR[v],
              text: `${whole(run.opsPerSec)} /s`,
            };
          }),
          {
            label: "ceiling (redis-benchmark)",
            value: ceiling,
            color: COLOR.ceiling,
            text: `${whole(ceiling)} /s`,
          },
        ],
      },
    ],
    "linear",
  );
  const percentiles = [
    ["p50", "p50"],
    ["p90", "p90"],
    ["p99", "p99"],
    ["p99.9", "p999"],
  ] as const;
  const [latency, latencyHeight] = panel(
    "Sequential heartbeat latency, µs, log scale (less is better)",
    50 + throughputHeight + 20,
    percentiles.map(([name, key]) => ({
      name,
      bars: [...VARIANTS, ROUND_TRIP].map((v) => {
        const us = r.heartbeat.latency.find((l) => l.variant === v)!.us[key];
        return { label: NAME[v], value: us, color: COLOR[v], text: `${us} µs` };
      }),
    })),
    "log",
  );
  const cpuTop = 50 + throughputHeight + 20 + latencyHeight + 20;
  const [cpu, cpuHeight] = panel(
    "Redis time per heartbeat call, µs, redis-benchmark, R rooms of R users (less is better)",
    cpuTop,
    summarizeCeiling(r.heartbeat.ceiling).map((c) => ({
      name: `R = ${c.roomSize}`,
      bars: CEILING_SCRIPTS.map((script) => ({
        label: SCRIPT_LABEL[script],
        value: c.us[script],
        color: SCRIPT_COLOR[script],
        text: `${c.us[script].toFixed(2)} µs`,
      })),
    })),
    "linear",
  );
  const memoryTop = cpuTop + cpuHeight + 20;
  const [memory, memoryHeight] = panel(
    "Bytes per connection, MEMORY USAGE: (a) short ids, (b) UUIDs + state (less is better)",
    memoryTop,
    r.memory.rows.map((row) => ({
      name: `rooms of ${row.roomSize}`,
      bars: [
        { label: "baseline", value: row.naive.perUser.memoryUsage, color: COLOR.naive },
        ...row.cells
          .filter((c) => c.variant === "a" || c.variant === "b")
          .map((c) => ({
            label: `rollcall (${c.variant})`,
            value: c.perConnection.memoryUsage,
            color: c.variant === "a" ? COLOR.rollcall : COLOR.multi,
          })),
      ].map((bar) => ({ ...bar, text: `${whole(bar.value)} B` })),
    })),
    "linear",
  );
  const height = memoryTop + memoryHeight + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" ` +
      `viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="white"/>`,
    text(20, 24, "rollcall vs the baseline's tracker", 'font-size="17" font-weight="bold"'),
    text(20, 40, headline(r), 'fill="#555"'),
    throughput,
    latency,
    cpu,
    memory,
    "</svg>",
    "",
  ].join("\n");
}
