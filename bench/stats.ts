import { build, type Histogram } from "hdr-histogram-js";
import type { Redis } from "ioredis";
import { cpus } from "node:os";

/** A latency distribution, in the unit it was recorded in. */
export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** Three significant digits from 1 to an hour of microseconds. */
export function histogram(): Histogram {
  return build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
  });
}

export function percentiles(h: Histogram): Percentiles {
  // A percentile reads the top of its bucket, which can pass the exact maximum.
  const at = (p: number) => Math.min(h.getValueAtPercentile(p), h.maxValue);
  return {
    count: h.totalCount,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    p999: at(99.9),
    max: h.maxValue,
  };
}

/** The middle item by some measure (the lower of the two middles for an even count). */
export function median<T>(items: readonly T[], measure: (item: T) => number): T {
  const sorted = [...items].sort((a, b) => measure(a) - measure(b));
  const middle = sorted[Math.floor((sorted.length - 1) / 2)];
  if (middle === undefined) throw new Error("median of nothing");
  return middle;
}

/** Whole microseconds since a `performance.now()` reading. */
export function micros(since: number): number {
  return Math.round((performance.now() - since) * 1000);
}

export async function info(redis: Redis, section: string): Promise<Map<string, string>> {
  const text = await redis.info(section);
  const fields = new Map<string, string>();
  for (const line of text.split("\r\n")) {
    const at = line.indexOf(":");
    if (at > 0 && !line.startsWith("#")) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  return fields;
}

export interface CommandStat {
  calls: number;
  usec: number;
  /** Calls that returned an error, or that Redis refused to run (rejected_calls). */
  failed: number;
}

const COMMANDSTAT = /^calls=(\d+),usec=(\d+),.*rejected_calls=(\d+),failed_calls=(\d+)/;

/** `INFO commandstats` by command name (subcommands as `config|get`). */
export async function commandStats(redis: Redis): Promise<Map<string, CommandStat>> {
  const stats = new Map<string, CommandStat>();
  for (const [key, value] of await info(redis, "commandstats")) {
    const match = COMMANDSTAT.exec(value);
    if (!match) throw new Error(`unexpected INFO commandstats line ${key}:${value}`);
    stats.set(key.replace(/^cmdstat_/, ""), {
      calls: Number(match[1]),
      usec: Number(match[2]),
      failed: Number(match[3]) + Number(match[4]),
    });
  }
  return stats;
}

/** EVALSHA and EVAL calls Redis has run. */
export async function scriptCalls(redis: Redis): Promise<number> {
  const stats = await commandStats(redis);
  return (stats.get("evalsha")?.calls ?? 0) + (stats.get("eval")?.calls ?? 0);
}

/** Zeroes INFO commandstats, errorstats and latencystats: what follows is counted alone. */
export async function resetStats(redis: Redis): Promise<void> {
  await redis.config("RESETSTAT");
}

/** What ran between two snapshots, leaving out the INFO calls that took the snapshots. */
export function commandsBetween(
  before: Map<string, CommandStat>,
  after: Map<string, CommandStat>,
): Map<string, CommandStat> {
  const delta = new Map<string, CommandStat>();
  for (const [name, a] of after) {
    if (name === "info") continue;
    const b = before.get(name) ?? { calls: 0, usec: 0, failed: 0 };
    if (a.calls > b.calls) {
      delta.set(name, {
        calls: a.calls - b.calls,
        usec: a.usec - b.usec,
        failed: a.failed - b.failed,
      });
    }
  }
  return delta;
}

/** CPU time used by redis-server so far, user and system, in seconds. */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const cpu = await info(redis, "cpu");
  return Number(cpu.get("used_cpu_user")) + Number(cpu.get("used_cpu_sys"));
}

export interface Load {
  seconds: number;
  /** Share of one core redis-server used over the run: near 1, Redis was the bottleneck. */
  redisCpu: number;
  /** Share of one core this Node process used (the client side of the bench). */
  clientCpu: number;
  /** Cores the whole host kept busy, every process counted: others' work competes too. */
  hostCpu: number;
}

/** Busy time of every core of the host so far, in seconds (os.cpus(), all processes). */
export function hostBusySeconds(): number {
  let ms = 0;
  for (const { times } of cpus()) ms += times.user + times.nice + times.sys + times.irq;
  return ms / 1000;
}

/** Runs some work and reports its wall time and who was busy meanwhile. */
export async function underLoad<T>(redis: Redis, work: () => Promise<T>): Promise<[T, Load]> {
  const redisBefore = await redisCpuSeconds(redis);
  const clientBefore = process.cpuUsage();
  const hostBefore = hostBusySeconds();
  const started = performance.now();
  const result = await work();
  const seconds = (performance.now() - started) / 1000;
  const client = process.cpuUsage(clientBefore);
  const host = hostBusySeconds() - hostBefore;
  const redisCpu = (await redisCpuSeconds(redis)) - redisBefore;
  return [
    result,
    {
      seconds,
      redisCpu: redisCpu / seconds,
      clientCpu: (client.user + client.system) / 1e6 / seconds,
      hostCpu: host / seconds,
    },
  ];
}

export interface ServerLatency {
  p50: number;
  p99: number;
  max: number;
  /** Calls of the command over the work, and Redis's time in them (INFO commandstats), µs. */
  calls: number;
  usec: number;
  /**
   * The slowest single call of any other command over the work (those the scripts ran among
   * them), µs: an O(1) command that took milliseconds is the host stalling Redis, not work.
   */
  slowestOther: { command: string; us: number };
}

/**
 * Redis's own latency percentiles of one command over some work, µs, from INFO latencystats
 * (Redis 7): measured in the server for every call, scripts included, at no cost to them.
 * Resets the server's statistics.
 */
export async function serverLatency<T>(
  redis: Redis,
  command: string,
  work: () => Promise<T>,
  /** Further commands whose time counts in `usec` (MULTI beside its EXEC). */
  alsoCounted: readonly string[] = [],
): Promise<[T, ServerLatency]> {
  const saved = await redis.config("GET", "latency-tracking*");
  await redis.config(
    "SET",
    "latency-tracking",
    "yes",
    "latency-tracking-info-percentiles",
    "50 99 100",
  );
  try {
    await resetStats(redis);
    const result = await work();
    const lines = await info(redis, "latencystats");
    const percentilesOf = (line: string) =>
      new Map(line.split(",").map((pair) => pair.split("=") as [string, string]));
    const line = lines.get(`latency_percentiles_usec_${command}`);
    if (line === undefined) throw new Error(`INFO latencystats has no ${command}`);
    const p = percentilesOf(line);
    let slowestOther = { command: "", us: 0 };
    for (const [field, value] of lines) {
      const other = field.replace("latency_percentiles_usec_", "");
      // The bench's own reads (INFO, CONFIG) are not the work's.
      if (other === command || /^(info|config)/.test(other)) continue;
      const us = Number(percentilesOf(value).get("p100"));
      if (us > slowestOther.us) slowestOther = { command: other, us };
    }
    const stats = await commandStats(redis);
    const stat = stats.get(command) ?? { calls: 0, usec: 0, failed: 0 };
    const failed = [command, ...alsoCounted].reduce((n, c) => n + (stats.get(c)?.failed ?? 0), 0);
    if (failed > 0) throw new Error(`${failed} ${command} calls failed`);
    return [
      result,
      {
        p50: Number(p.get("p50")),
        p99: Number(p.get("p99")),
        max: Number(p.get("p100")),
        calls: stat.calls,
        usec: alsoCounted.reduce((usec, c) => usec + (stats.get(c)?.usec ?? 0), stat.usec),
        slowestOther,
      },
    ];
  } finally {
    await redis.config("SET", ...(saved as [string, string]));
  }
}
