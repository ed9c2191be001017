import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { Rollcall } from "../src/index.js";
import { HEARTBEAT_BATCH } from "../src/engine/rollcall.js";
import { buildDist, expectBuilt, ROOT } from "../test/kit/build.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { members, STEADY } from "./population.js";
import type { Progress } from "./progress.js";
import { summarizeCeiling } from "./ceiling.js";
import { number, ratio, table } from "./format.js";
import { best, describe, heartbeat, type HeartbeatResults } from "./heartbeat.js";
import { resultOf, type Run, type Section } from "./section.js";
import { median } from "./stats.js";

const exec = promisify(execFile);

/** `rollcall stats` over this many connections in rooms of `roomSize`, `runs` times. */
export interface CountsProfile {
  connections: number;
  roomSize: number;
  runs: number;
}

export interface CountsResults {
  connections: number;
  rooms: number;
  /** `rollcall stats --json`, the whole command (process start included), wall ms, per run. */
  statsMs: number[];
  /** What it printed in total, and whether that is exactly what was made. */
  total: { rooms: number; users: number; connections: number };
  exact: boolean;
  /** The baseline's only way to the same totals: SCAN its keys, ZCARD each room; wall ms. */
  naiveMs: number[];
}

function countsSteps(): number {
  return 3;
}

/**
 * `rollcall stats` over many connections: the engine keeps per-bucket counts, so the command
 * reads one hash per bucket however many rooms there are. Timed as a user runs it, built, in a
 * new process each time.
 */
async function benchCounts(
  lab: Lab,
  profile: CountsProfile,
  progress: Progress,
): Promise<CountsResults> {
  const { connections, roomSize, runs } = profile;
  const population = members(connections / roomSize, roomSize);
  await lab.flush();
  await progress.step(`counts: ${connections} connections, both layouts`, async () => {
    const client = lab.connect({ enableAutoPipelining: true });
    const rollcall = new Rollcall(client, STEADY);
    const batches = Array.from({ length: Math.ceil(population.length / HEARTBEAT_BATCH) }, (_, i) =>
      population.slice(i * HEARTBEAT_BATCH, (i + 1) * HEARTBEAT_BATCH),
    );
    await forEachInFlight(batches, 8, (batch) => rollcall.heartbeatMany(batch));
    const tracker = new NaiveTracker(client, STEADY.presenceWindowMs! / 1000);
    await forEachInFlight(population, 256, (m) => tracker.updatePresence(m.room, m.user));
    lab.release(client);
    await lab.dropReplies();
  });
  await progress.step("counts: build the CLI", async () => {
    await buildDist();
    expectBuilt("cli");
  });
  return progress.step(`counts: rollcall stats, ${runs} runs`, async () => {
    const statsMs: number[] = [];
    const naiveMs: number[] = [];
    let printed: CountsResults["total"] | undefined;
    for (let run = 0; run < runs; run++) {
      const started = performance.now();
      const { stdout } = await exec(process.execPath, [
        join(ROOT, "dist/cli/main.js"),
        "--redis",
        lab.url,
        "stats",
        "--json",
      ]);
      statsMs.push(performance.now() - started);
      printed = (JSON.parse(stdout) as { total: CountsResults["total"] }).total;
      naiveMs.push(await naiveCount(lab));
    }
    const total = {
      rooms: printed!.rooms,
      users: printed!.users,
      connections: printed!.connections,
    };
    const exact =
      total.rooms === connections / roomSize &&
      total.users === connections &&
      total.connections === connections;
    if (!exact) throw new Error(`rollcall stats printed ${JSON.stringify(total)}`);
    await lab.flush();
    return { connections, rooms: connections / roomSize, statsMs, total, exact, naiveMs };
  });
}

/** The baseline's rooms are sorted sets named by conversation: SCAN them, ZCARD each. */
async function naiveCount(lab: Lab): Promise<number> {
  const started = performance.now();
  let members = 0;
  const probe = new NaiveTracker(lab.admin);
  for await (const batch of lab.admin.scanStream({ match: probe.presenceKey("*"), count: 1_000 })) {
    const sizes = await Promise.all((batch as string[]).map((key) => lab.admin.zcard(key)));
    members += sizes.reduce((a, b) => a + b, 0);
  }
  if (members === 0) throw new Error("the baseline's rooms are gone");
  return performance.now() - started;
}

/** The heartbeat section's batched figures, where the run has them (not with --only). */
function batchedSection(h: HeartbeatResults): string[] {
  const ceiling = summarizeCeiling(h.ceiling);
  const batched = best(h.throughput, "batched");
  const naive = best(h.throughput, "naive");
  return [
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
  ];
}

/** Redis per batch: batched heartbeats against the baseline, and `rollcall stats`. */
function scaleSection(c: CountsResults, run: Run): string {
  const h = resultOf(heartbeat, run);
  return [
    "## Redis per batch",
    "",
    ...(h ? batchedSection(h) : []),
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

/** `rollcall stats` over many connections (its report also shows the batched heartbeats). */
export const counts: Section<CountsProfile, CountsResults> = {
  name: "counts",
  profiles: {
    full: { connections: 200_000, roomSize: 10, runs: 5 },
    smoke: { connections: 2_000, roomSize: 10, runs: 1 },
  },
  steps: countsSteps,
  run: benchCounts,
  report: scaleSection,
  rows: (c) => {
    const statsMs = median(c.statsMs, (ms) => ms);
    return [
      {
        name: `rollcall stats over ${number(c.connections)} connections ≤ 1 s, exact`,
        value: statsMs,
        unit: "ms",
        note: c.exact ? "exact" : "NOT exact",
        target: { op: "≤", limit: 1_000, holds: c.exact },
      },
    ];
  },
};
