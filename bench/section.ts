import type { Lab } from "./lab.js";
import type { Progress } from "./progress.js";

/**
 * The contract of a bench section: one file that measures one thing, reports it, and names its
 * headline figures. bench/sections.ts lists the sections in the order a run takes them; nothing
 * else needs to know a section exists.
 */

/** How much to run: `full` for the committed results, `smoke` to prove it runs (CI). */
export type ProfileName = "full" | "smoke";

/** The facts of a run: where, on what, how long. */
export interface Meta {
  date: string;
  profile: ProfileName;
  redisVersion: string;
  redis: "embedded" | "external";
  nodeVersion: string;
  cores: number;
  cpu: string;
  platform: string;
  seconds: number;
  /** Each section's share of `seconds`, in the order run. */
  sections: Record<string, number>;
}

/** A run so far: its facts, and the result of each section already run, under its name. */
export interface Run {
  meta: Meta;
  results: Record<string, unknown>;
}

/**
 * What a figure is held to: `value op limit`, and `holds` for what the figure alone cannot show
 * (the totals were exact, every socket was present). Reported, never asserted.
 */
export interface Target {
  op: "≤" | "≥" | "<" | "=";
  limit: number;
  holds?: boolean;
}

/** One figure of a section: the Targets table lists those with a target. */
export interface Row {
  /** What is measured, and for a target what it is held to, in words. */
  name: string;
  value: number;
  /** "×" and "%" follow the value directly; any other unit after a space. */
  unit: string;
  /** Decimals shown (0 unless given). */
  digits?: number;
  /** What the value came from, shown after it in parentheses. */
  note?: string;
  target?: Target;
}

export interface Section<P = unknown, R = unknown> {
  /** What `--only` takes, and the key of the section's result in the saved JSON. */
  name: string;
  /** The section's own sizes for a full run and for a smoke run. */
  profiles: Record<ProfileName, P>;
  /** Left out of the whole run: it runs with `--only` alone (its own results file). */
  alone?: boolean;
  /** Progress steps `run` takes under `profile`. */
  steps(profile: P): number;
  /** Measures, on a Redis that the section may flush at will. */
  run(lab: Lab, profile: P, progress: Progress): Promise<R>;
  /** The section's markdown (## headings), which may use the results of sections run before. */
  report(result: R, run: Run): string;
  /** The section's headline figures and targets. */
  rows?(result: R, run: Run): Row[];
}

/** The result of an earlier section of this run, if it ran (not under `--only`). */
export function resultOf<R>(section: Section<unknown, R>, run: Run): R | undefined {
  return run.results[section.name] as R | undefined;
}

/** Whether a row meets its target (a row without one has nothing to meet). */
export function met({ value, target }: Row): boolean {
  if (!target) return true;
  const { op, limit, holds = true } = target;
  const within =
    op === "≤"
      ? value <= limit
      : op === "≥"
        ? value >= limit
        : op === "<"
          ? value < limit
          : value === limit;
  return within && holds;
}
