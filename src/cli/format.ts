import { styleText } from "node:util";

type Format = Parameters<typeof styleText>[0];

// Colours only for a person at a terminal, and never when NO_COLOR asks (https://no-color.org).
const colours = process.stdout.isTTY === true && !process.env.NO_COLOR;

export function paint(format: Format, text: string): string {
  return colours ? styleText(format, text) : text;
}

/** A duration in a few characters: 850ms, 4.2s, 42s, 5m07s, 3h04m, 2d03h. */
export function duration(ms: number): string {
  const t = Math.max(0, Math.round(ms));
  if (t < 1_000) return `${t}ms`;
  if (t < 10_000) return `${(t / 1_000).toFixed(1)}s`;
  const s = Math.floor(t / 1_000);
  if (s < 60) return `${s}s`;
  const two = (n: number) => String(n).padStart(2, "0");
  if (s < 3_600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3_600)}h${two(Math.floor(s / 60) % 60)}m`;
  return `${Math.floor(s / 86_400)}d${two(Math.floor(s / 3_600) % 24)}h`;
}

/** `1 leave`, `2 leaves`. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** A member state as compact JSON, cut short for a table cell. */
export function compactJson(value: unknown, max = 60): string {
  const json = JSON.stringify(value);
  return json.length <= max ? json : `${json.slice(0, max - 1)}…`;
}

/** The names of a roster, as a watch prints it after each event: `3 present: ann, bob, cy`. */
export function summary(roster: {
  count: number;
  members: readonly { user: string }[];
  typing: readonly string[];
}): string {
  const shown = 20;
  const names = roster.members.slice(0, shown).map((m) => m.user);
  const more = roster.count - names.length;
  let text = `${roster.count} present`;
  if (names.length > 0) text += `: ${names.join(", ")}${more > 0 ? `, … ${more} more` : ""}`;
  if (roster.typing.length > 0) text += `; typing: ${roster.typing.join(", ")}`;
  return text;
}

/** One line on stdout. */
export function print(line = ""): void {
  process.stdout.write(`${line}\n`);
}
