import { summarizeCeiling } from "./ceiling.js";
import { number, ratio, table } from "./format.js";
import { describe } from "./heartbeat.js";
import type { Results } from "./report.js";
import { median } from "./stats.js";
import { best } from "./targets.js";

/** Redis per batch: batched heartbeats against the baseline, and `rollcall stats`. */
export function scaleSection(r: Results): string {
  const ceiling = summarizeCeiling(r.heartbeat.ceiling);
  const h = r.heartbeat;
  const batched = best(h.throughput, "batched");
  const naive = best(h.throughput, "naive");
  const c = r.counts;
  return [
    "## Redis per batch",
    "",
    "### Batched steady heartbeats (redis-benchmark)",
    "",
    "The first connections of each ceiling population (below) in one `heartbeatMany`, as a " +
      "gateway sends them, run by redis-benchmark beside the baseline's work scripted, in the " +
      "same repeats. *Redis CPU* is redis-server's user + sys time (I/O included) over the run, " +
      "per heartbeat; the ratio is the median of each repeat's pair.",
    "",
    table(
      [
        "room size",
        "heartbeats per call",
        "script µs / heartbeat",
        "Redis CPU µs / heartbeat",
        "baseline Redis CPU µs / heartbeat",
        "ratio",
        "heartbeats/s",
      ],
      ceiling.map((s) => [
        number(s.roomSize),
        number(s.batched.heartbeats),
        number(s.batched.us, 2),
        number(s.batched.redisCpuUs, 2),
        number(s.batched.naiveRedisCpuUs, 2),
        ratio(s.batched.cpuRatio),
        number(s.batched.heartbeatsPerSec),
      ]),
    ),
    "",
    "### Batched throughput (through ioredis, as the heartbeat section drives)",
    "",
    `Each bucket's connections in batches of 128, one heartbeatMany each: best run ` +
      `${number(batched.opsPerSec)} heartbeats/s (${describe(batched)}), against the baseline's ` +
      `${number(naive.opsPerSec)} (${describe(naive)}): ${ratio(batched.opsPerSec / naive.opsPerSec)}.`,
    "",
    "### `rollcall stats` over many connections",
    "",
    `${number(c.connections)} connections in ${number(c.rooms)} rooms of ` +
      `${number(c.connections / c.rooms)}. The built CLI in a new process each run, process start ` +
      `included: median ${number(median(c.statsMs, (ms) => ms))} ms over ${c.statsMs.length} ` +
      `runs (${c.statsMs.map((ms) => number(ms)).join(", ")}), totals ` +
      `${c.exact ? "exactly" : "NOT"} what was made (${number(c.total.rooms)} rooms, ` +
      `${number(c.total.users)} users, ${number(c.total.connections)} connections). The ` +
      `baseline's only way to its totals, SCAN and ZCARD of every room, from a warm connection: ` +
      `median ${number(median(c.naiveMs, (ms) => ms))} ms.`,
  ].join("\n");
}
