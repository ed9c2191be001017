import { setTimeout as sleep } from "node:timers/promises";
import { Rollcall, Sweeper, type RollcallOptions } from "../src/index.js";
import { benchmarkScript, loadScript, type BenchmarkConfig } from "./benchmark.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { TIME_ONLY, TIME_ZSCORE } from "./lua.js";
import { grid, RANDOM, type Member } from "./population.js";
import type { Progress } from "./progress.js";
import { commandStats, median, redisCpuSeconds, resetStats } from "./stats.js";
import { number, table } from "./format.js";
import type { Row, Section } from "./section.js";

/**
 * Live rooms have nothing due, but a room's due score is a lower bound that steady heartbeats
 * leave alone (it would cost each of them a look at the due index): a live room's score comes due
 * about once per (window − heartbeat interval), and the Sweeper then visits the room, finds
 * nobody expired and writes the exact deadline back. This section weighs that choice: Redis CPU
 * per heartbeat with a Sweeper and without, against the cheapest way to keep live rooms out of
 * the sweep (one ZSCORE of the room's due entry in every heartbeat).
 */

/** One stretch of steady heartbeats, with the Sweeper running or not. */
/**
 * Live rooms (nothing due; members beat every `heartbeatMs`, window `presenceWindowMs`): Redis
 * CPU with a Sweeper and without, in alternating segments of `segmentMs`, `repeats` of each.
 */
export interface LiveProfile {
  roomSizes: number[];
  connections: number;
  presenceWindowMs: number;
  heartbeatMs: number;
  segmentMs: number;
  repeats: number;
  /** redis-benchmark of the alternative (a ZSCORE per heartbeat), runs of each script. */
  alternative: BenchmarkConfig & { repeats: number };
}

export interface LiveSegment {
  sweeping: boolean;
  seconds: number;
  heartbeats: number;
  /** redis-server CPU, INFO cpu used_cpu_user + used_cpu_sys. */
  redisCpuSeconds: number;
  /** Script calls (heartbeats' and the Sweeper's) and Redis's time in them, INFO commandstats. */
  scriptCalls: number;
  scriptUsec: number;
  /** Sweeper passes that ended within the segment, the rooms they visited, their script calls. */
  passes: number;
  visits: number;
  sweepCalls: number;
}

/** Per heartbeat, µs. */
export interface LiveCost {
  /** redis-server CPU: everything Redis did, I/O included. */
  redisCpuUs: number;
  /** Redis's time in scripts (EVALSHA), heartbeats' and the Sweeper's. */
  scriptUs: number;
}

export interface LiveAlternative {
  /** Rooms in the due zset the ZSCORE reads. */
  dueRooms: number;
  /** Median script time per call, µs: TIME alone, TIME + ZSCORE. */
  timeUs: number;
  zscoreUs: number;
  /** What the ZSCORE adds to a heartbeat, µs: the median of the paired differences. */
  extraUs: number;
  runs: { script: "time" | "zscore"; usPerCall: number; opsPerSec: number }[];
}

export interface LiveResult {
  roomSize: number;
  rooms: number;
  connections: number;
  presenceWindowMs: number;
  heartbeatMs: number;
  segments: LiveSegment[];
  without: LiveCost;
  with: LiveCost;
  /** with − without, redis-server CPU per heartbeat: what sweeping live rooms costs. */
  sweepUs: number;
  /** The Sweeper's script time per heartbeat: with's script time less its heartbeats' at
   * without's time per call. */
  sweepScriptUs: number;
  /** Sweeper visits per live room per presence window, over the measured segments. */
  visitsPerRoomPerWindow: number;
  /** redis-server CPU per visit: sweepUs spread over the visits. */
  visitUs: number;
  alternative: LiveAlternative;
  /** Sweeping live rooms cost Redis less per heartbeat than the alternative's ZSCORE. */
  cheaper: boolean;
}

function liveSteps(p: LiveProfile): number {
  return p.roomSizes.length * (2 + 2 * p.repeats);
}

/** Heartbeats are sent every TICK_MS, as many as are due by then. */
const TICK_MS = 10;

async function benchLive(
  lab: Lab,
  profile: LiveProfile,
  progress: Progress,
): Promise<LiveResult[]> {
  const results: LiveResult[] = [];
  for (const roomSize of profile.roomSizes) {
    results.push(await liveRooms(lab, profile, progress, roomSize));
  }
  await lab.flush();
  return results;
}

async function liveRooms(
  lab: Lab,
  profile: LiveProfile,
  progress: Progress,
  roomSize: number,
): Promise<LiveResult> {
  const { connections, presenceWindowMs, heartbeatMs, segmentMs, repeats } = profile;
  const rooms = Math.max(1, Math.floor(connections / roomSize));
  // One bucket: the due zset holds every room, the one the alternative's ZSCORE would read.
  const options: RollcallOptions = {
    prefix: `live${roomSize}`,
    buckets: 1,
    presenceWindowMs,
    typingWindowMs: Math.floor(presenceWindowMs / 3),
    // A member that expired would be a leave at once (the bench fails on any expiry).
    leaveGraceMs: 0,
  };
  const label = `live rooms of ${roomSize}`;
  await lab.flush();
  const present = shuffled(grid(rooms, roomSize));
  const clients = [0, 1].map(() => lab.connect({ enableAutoPipelining: true }));
  const instances = clients.map((client) => new Rollcall(client, options));
  await progress.step(`${label}: joins`, async () => {
    await forEachInFlight(present, 64, (m) =>
      instances[0]!.heartbeat(m.room, m.user, m.connection),
    );
    await lab.dropReplies();
  });
  const beats = new Beats(instances, present, heartbeatMs);
  const sweeper = new Sweeper(new Rollcall(lab.connect(), options));
  const tally = { passes: 0, visits: 0, calls: 0 };
  let failure: Error | undefined;
  sweeper.on("pass", (pass) => {
    tally.passes += 1;
    tally.visits += pass.rooms;
    tally.calls += pass.calls;
    if (pass.connections > 0) {
      failure ??= new Error(`the sweeper expired ${pass.connections} live connections`);
    }
  });
  sweeper.on("failed", (error) => (failure ??= error));
  const segments: LiveSegment[] = [];
  const measure = async (sweeping: boolean): Promise<LiveSegment> => {
    await lab.collectLuaGarbage();
    const before = { ...tally, heartbeats: beats.completed };
    await resetStats(lab.admin);
    const cpu = await redisCpuSeconds(lab.admin);
    const started = performance.now();
    await sleep(segmentMs);
    const redisCpu = (await redisCpuSeconds(lab.admin)) - cpu;
    const seconds = (performance.now() - started) / 1000;
    const stats = await commandStats(lab.admin);
    // ioredis sends EVAL on a connection's first call of a script, EVALSHA after.
    const scripts = ["eval", "evalsha"].reduce(
      (sum, name) => {
        const stat = stats.get(name);
        return { calls: sum.calls + (stat?.calls ?? 0), usec: sum.usec + (stat?.usec ?? 0) };
      },
      { calls: 0, usec: 0 },
    );
    const failed = failure ?? beats.failure;
    if (failed) throw failed;
    return {
      sweeping,
      seconds,
      heartbeats: beats.completed - before.heartbeats,
      redisCpuSeconds: redisCpu,
      scriptCalls: scripts.calls,
      scriptUsec: scripts.usec,
      passes: tally.passes - before.passes,
      visits: tally.visits - before.visits,
      sweepCalls: tally.calls - before.calls,
    };
  };
  try {
    for (let repeat = 0; repeat < repeats; repeat++) {
      const of = `${repeat + 1}/${repeats}`;
      segments.push(await progress.step(`${label}: no sweeper ${of}`, () => measure(false)));
      await progress.step(`${label}: with a sweeper ${of}`, async () => {
        sweeper.start();
        // A window to settle: the first pass visits every room the pause left overdue.
        await sleep(presenceWindowMs);
        segments.push(await measure(true));
        await sweeper.stop();
      });
    }
  } finally {
    await sweeper.stop();
    await beats.stop();
  }
  const alternative = await progress.step(`${label}: a ZSCORE per heartbeat instead`, () =>
    benchAlternative(lab, profile, instances[0]!.layout.due(0), rooms),
  );
  for (const client of clients) lab.release(client);
  return summarize(profile, roomSize, rooms, present.length, segments, alternative);
}

function summarize(
  profile: LiveProfile,
  roomSize: number,
  rooms: number,
  connections: number,
  segments: LiveSegment[],
  alternative: LiveAlternative,
): LiveResult {
  const { presenceWindowMs, heartbeatMs } = profile;
  const total = (sweeping: boolean, field: keyof LiveSegment) =>
    segments.filter((s) => s.sweeping === sweeping).reduce((sum, s) => sum + Number(s[field]), 0);
  const cost = (sweeping: boolean): LiveCost => ({
    redisCpuUs: (total(sweeping, "redisCpuSeconds") * 1e6) / total(sweeping, "heartbeats"),
    scriptUs: total(sweeping, "scriptUsec") / total(sweeping, "heartbeats"),
  });
  const without = cost(false);
  const withSweeper = cost(true);
  const heartbeats = total(true, "heartbeats");
  const perHeartbeatCall = total(false, "scriptUsec") / total(false, "scriptCalls");
  const heartbeatCalls = total(true, "scriptCalls") - total(true, "sweepCalls");
  const sweepUs = withSweeper.redisCpuUs - without.redisCpuUs;
  const visits = total(true, "visits");
  const windows = total(true, "seconds") / (presenceWindowMs / 1000);
  return {
    roomSize,
    rooms,
    connections,
    presenceWindowMs,
    heartbeatMs,
    segments,
    without,
    with: withSweeper,
    sweepUs,
    sweepScriptUs: (total(true, "scriptUsec") - heartbeatCalls * perHeartbeatCall) / heartbeats,
    visitsPerRoomPerWindow: visits / rooms / windows,
    visitUs: visits > 0 ? (sweepUs * heartbeats) / visits : 0,
    alternative,
    cheaper: sweepUs < alternative.extraUs,
  };
}

/**
 * redis-benchmark: TIME + ZSCORE of a random room in the due zset, and TIME alone with the same
 * arguments, alternating; the difference is what the ZSCORE would add to each heartbeat.
 */
async function benchAlternative(
  lab: Lab,
  profile: LiveProfile,
  dueKey: string,
  rooms: number,
): Promise<LiveAlternative> {
  const { repeats, ...config } = profile.alternative;
  const time = await loadScript(lab, TIME_ONLY);
  const zscore = await loadScript(lab, TIME_ZSCORE);
  const args = ["1", dueKey, `r${RANDOM}`];
  const runs: LiveAlternative["runs"] = [];
  const differences: number[] = [];
  for (let repeat = 0; repeat < repeats; repeat++) {
    const [t, z] = [
      await benchmarkScript(lab, config, rooms, ["EVALSHA", time, ...args], { time: 1 }),
      await benchmarkScript(lab, config, rooms, ["EVALSHA", zscore, ...args], {
        time: 1,
        zscore: 1,
      }),
    ];
    runs.push({ script: "time", usPerCall: t.usPerCall, opsPerSec: t.opsPerSec });
    runs.push({ script: "zscore", usPerCall: z.usPerCall, opsPerSec: z.opsPerSec });
    differences.push(z.usPerCall - t.usPerCall);
  }
  const us = (script: "time" | "zscore") =>
    median(
      runs.filter((r) => r.script === script),
      (r) => r.usPerCall,
    ).usPerCall;
  return {
    dueRooms: rooms,
    timeUs: us("time"),
    zscoreUs: us("zscore"),
    extraUs: median(differences, (d) => d),
    runs,
  };
}

/**
 * Every connection beats once per interval, at its own phase: a steady stream of heartbeats, as
 * many each tick as are due, spread over the instances, until stopped. Each must be steady.
 */
class Beats {
  completed = 0;
  failure: Error | undefined;
  private outstanding = 0;
  private running = true;
  private readonly loop: Promise<void>;

  constructor(
    private readonly instances: readonly Rollcall[],
    private readonly present: readonly Member[],
    private readonly intervalMs: number,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    const started = performance.now();
    let sent = 0;
    while (this.running) {
      const due = Math.floor(
        ((performance.now() - started) / this.intervalMs) * this.present.length,
      );
      for (; sent < due; sent++) {
        const m = this.present[sent % this.present.length]!;
        const instance = this.instances[sent % this.instances.length]!;
        this.outstanding += 1;
        instance.heartbeat(m.room, m.user, m.connection).then(
          ({ joined }) => {
            this.outstanding -= 1;
            if (joined) this.failure ??= new Error("a live member expired: heartbeats fell behind");
            else this.completed += 1;
          },
          (error: unknown) => {
            this.outstanding -= 1;
            this.failure ??= new Error("a heartbeat failed", { cause: error });
          },
        );
      }
      await sleep(TICK_MS);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    while (this.outstanding > 0) await sleep(1);
  }
}

/** Connections in random order, so that each room's members beat at scattered phases. */
function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

function liveSection(live: LiveResult[]): string {
  const first = live[0];
  if (!first) return "";
  const segments = first.segments.length / 2;
  return [
    "## Live rooms: the sweeper's visits against a ZSCORE per heartbeat",
    "",
    "A live room has nothing due, but its due score is a lower bound that steady heartbeats do " +
      "not refresh: the Sweeper visits each live room about once per (window − heartbeat " +
      "interval), finds nobody expired and writes the room's exact deadline. The cheapest way " +
      "to keep live rooms out of the sweep would cost every heartbeat one more command: a " +
      "ZSCORE of the room's due entry (and a rewrite when it nears). Here " +
      `${number(first.connections)} connections, one per user, beat every ` +
      `${number(first.heartbeatMs)} ms at scattered phases under a ${number(first.presenceWindowMs)} ms ` +
      "window (the defaults' 45 s : 15 s ratio) in a deployment of one bucket, in segments of " +
      `${number(first.segments[0]?.seconds ?? 0, 1)} s without a Sweeper and with one at its ` +
      `default interval (after a window to settle), ${segments} of each, alternating. Redis CPU ` +
      "is redis-server's used_cpu Δ over a segment ÷ its heartbeats; the sweeper's share is the " +
      "difference. The alternative is measured with redis-benchmark: (TIME + ZSCORE of a random " +
      "room in the due zset of that many rooms) − (TIME only), median of paired runs.",
    "",
    table(
      [
        "room size",
        "rooms",
        "heartbeats/s",
        "Redis CPU µs / heartbeat, no sweeper",
        "with a sweeper",
        "sweeper's share",
        "sweeper's script µs / heartbeat",
        "visits per room per window",
        "Redis CPU µs per visit",
        "ZSCORE per heartbeat µs",
        "sweeping is cheaper",
      ],
      live.map((l) => {
        const measured = l.segments.filter((s) => s.sweeping);
        const heartbeats = measured.reduce((sum, s) => sum + s.heartbeats, 0);
        const seconds = measured.reduce((sum, s) => sum + s.seconds, 0);
        return [
          number(l.roomSize),
          number(l.rooms),
          number(heartbeats / seconds),
          number(l.without.redisCpuUs, 2),
          number(l.with.redisCpuUs, 2),
          number(l.sweepUs, 2),
          number(l.sweepScriptUs, 2),
          number(l.visitsPerRoomPerWindow, 2),
          number(l.visitUs, 1),
          `${number(l.alternative.extraUs, 2)} (${number(l.alternative.zscoreUs, 2)} − ${number(l.alternative.timeUs, 2)})`,
          l.cheaper ? "yes" : "**no**",
        ];
      }),
    ),
    "",
    "*sweeper's script µs* is the Sweeper's time in its scripts per heartbeat (EVALSHA time " +
      "with a sweeper, less its heartbeats at the time per call without one), a second " +
      "estimate of its share that leaves out I/O. Segments:",
    "",
    table(
      ["room size", "sweeper", "s", "heartbeats", "Redis CPU µs / heartbeat", "passes", "visits"],
      live.flatMap((l) =>
        l.segments.map((s) => [
          number(l.roomSize),
          s.sweeping ? "yes" : "no",
          number(s.seconds, 1),
          number(s.heartbeats),
          number((s.redisCpuSeconds * 1e6) / s.heartbeats, 2),
          number(s.passes),
          number(s.visits),
        ]),
      ),
    ),
  ].join("\n");
}

// 3 000 : 1 000 ms, the defaults' 45 s : 15 s ratio, so a run sees several windows.
/** Live rooms: what the Sweeper's visits cost against a ZSCORE per heartbeat. */
export const live: Section<LiveProfile, LiveResult[]> = {
  name: "live",
  profiles: {
    full: {
      roomSizes: [5, 20],
      connections: 10_000,
      presenceWindowMs: 3_000,
      heartbeatMs: 1_000,
      segmentMs: 5_000,
      repeats: 2,
      alternative: { clients: 50, pipeline: 16, requests: 200_000, repeats: 3 },
    },
    smoke: {
      roomSizes: [5, 20],
      connections: 500,
      presenceWindowMs: 1_500,
      heartbeatMs: 500,
      segmentMs: 1_000,
      repeats: 1,
      alternative: { clients: 10, pipeline: 16, requests: 5_000, repeats: 1 },
    },
  },
  steps: liveSteps,
  run: benchLive,
  report: liveSection,
  rows: (results) =>
    results.map((l): Row => ({
      name:
        `live rooms of ${l.roomSize}: sweeping them costs less Redis CPU than a ZSCORE ` +
        `per heartbeat`,
      value: l.sweepUs,
      unit: "µs per heartbeat",
      digits: 2,
      note:
        `vs ${number(l.alternative.extraUs, 2)} µs; ` +
        `${number(l.visitsPerRoomPerWindow, 2)} visits per room per window`,
      target: { op: "<", limit: l.alternative.extraUs },
    })),
};
