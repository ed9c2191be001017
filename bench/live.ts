import { setTimeout as sleep } from "node:timers/promises";
import { Rollcall, Sweeper, type RollcallOptions } from "../src/index.js";
import { benchmarkScript, loadScript } from "./benchmark.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { TIME_ONLY, TIME_ZSCORE } from "./lua.js";
import { grid, RANDOM, type Member } from "./population.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";
import { commandStats, median, redisCpuSeconds, resetStats } from "./stats.js";

/**
 * Live rooms have nothing due, but a room's due score is a lower bound that steady heartbeats
 * leave alone (it would cost each of them a look at the due index): a live room's score comes due
 * about once per (window − heartbeat interval), and the Sweeper then visits the room, finds
 * nobody expired and writes the exact deadline back. This section weighs that choice: Redis CPU
 * per heartbeat with a Sweeper and without, against the cheapest way to keep live rooms out of
 * the sweep (one ZSCORE of the room's due entry in every heartbeat).
 */

/** One stretch of steady heartbeats, with the Sweeper running or not. */
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

export function liveSteps(p: Profile): number {
  return p.live.roomSizes.length * (2 + 2 * p.live.repeats);
}

/** Heartbeats are sent every TICK_MS, as many as are due by then. */
const TICK_MS = 10;

export async function benchLive(
  lab: Lab,
  profile: Profile,
  progress: Progress,
): Promise<LiveResult[]> {
  const results: LiveResult[] = [];
  for (const roomSize of profile.live.roomSizes) {
    results.push(await liveRooms(lab, profile, progress, roomSize));
  }
  await lab.flush();
  return results;
}

async function liveRooms(
  lab: Lab,
  profile: Profile,
  progress: Progress,
  roomSize: number,
): Promise<LiveResult> {
  const { connections, presenceWindowMs, heartbeatMs, segmentMs, repeats } = profile.live;
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
  profile: Profile,
  roomSize: number,
  rooms: number,
  connections: number,
  segments: LiveSegment[],
  alternative: LiveAlternative,
): LiveResult {
  const { presenceWindowMs, heartbeatMs } = profile.live;
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
  profile: Profile,
  dueKey: string,
  rooms: number,
): Promise<LiveAlternative> {
  const { repeats, ...config } = profile.live.alternative;
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
