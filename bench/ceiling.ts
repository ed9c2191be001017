import { Rollcall, type RollcallOptions } from "../src/index.js";
import {
  benchmarkScript,
  loadScript,
  redisBenchmarkVersion,
  type BenchmarkConfig,
  type BenchmarkRun,
  type Expected,
} from "./benchmark.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { NAIVE_HEARTBEAT, TIME_ONLY } from "./lua.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { grid, padded, RANDOM, type Member } from "./population.js";
import { median } from "./stats.js";

/**
 * What redis-benchmark runs, in the same run and side by side: `noop` a script that only reads
 * the time (the floor of any script call with rollcall's keys and arguments), `naive` the
 * baseline's update_presence as one script, `rollcall` the real steady heartbeat.
 */
export const CEILING_SCRIPTS = ["noop", "naive", "rollcall"] as const;
export type CeilingScript = (typeof CEILING_SCRIPTS)[number];

export interface CeilingConfig extends BenchmarkConfig {
  /** R rooms of R users for each R. */
  roomSizes: number[];
}

export interface CeilingRun extends BenchmarkRun {
  roomSize: number;
  script: CeilingScript;
  /** The throughput repeat it ran after. */
  repeat: number;
}

export interface CeilingCommand {
  roomSize: number;
  script: CeilingScript;
  command: string[];
}

export interface CeilingResults extends BenchmarkConfig {
  redisBenchmark: string;
  /** What redis-benchmark sent, per room size and script. */
  commands: CeilingCommand[];
  /** Every run: each room size and script once per throughput repeat. */
  runs: CeilingRun[];
}

/** The commands each call may run: a rollcall heartbeat that was not steady fails the run. */
const EXPECTED: Record<CeilingScript, Expected> = {
  noop: { time: 1 },
  naive: { time: 1, zscore: 1, zadd: 1, expire: 1 },
  // The room's meta and the record in one HMGET, the patched record's HSET: nothing else.
  rollcall: { time: 1, hmget: 1, hset: 1 },
};

/**
 * One bucket, so every room shares one hash tag, as in a deployment's busiest slot. An hour's
 * window so nobody expires, and the longest key TTL so that no heartbeat of the run crosses into
 * a new quarter of it (that one would refresh the TTLs, and fail the run as not steady).
 */
const DEPLOYMENT: RollcallOptions = {
  presenceWindowMs: 3_600_000,
  leaveGraceMs: 0,
  keyTtlMs: 30 * 86_400_000,
  buckets: 1,
};
/** The baseline's tracker with the same window: EXPIRE 3 windows. */
const NAIVE_WINDOW_S = 3_600;

interface Population {
  roomSize: number;
  naiveKeys: string[];
  commands: Record<CeilingScript, string[]>;
}

/**
 * What one Redis core can do: redis-benchmark, a C client with pipelining, sends each script
 * with `__rand_int__` in the room's keys and in the user, so that every call refreshes one of
 * R × R present users picked at random, R rooms of R users for each room size.
 */
export class Ceiling {
  private constructor(
    private readonly lab: Lab,
    private readonly config: CeilingConfig,
    private readonly populations: Population[],
    readonly version: string,
  ) {}

  /** Makes the users present, in rollcall's layout and the baseline's, and builds the commands. */
  static async prepare(lab: Lab, config: CeilingConfig): Promise<Ceiling> {
    const client = lab.connect({ enableAutoPipelining: true });
    const noop = await loadScript(lab, TIME_ONLY);
    const naive = await loadScript(lab, NAIVE_HEARTBEAT);
    const populations: Population[] = [];
    for (const roomSize of config.roomSizes) {
      const present = grid(roomSize, roomSize);
      const rollcall = new Rollcall(client, { ...DEPLOYMENT, prefix: `ceiling${roomSize}` });
      await makeSteady(lab, rollcall, present);
      const tracker = new NaiveTracker(client, NAIVE_WINDOW_S);
      const conversation = (room: string) => `ceiling${roomSize}-${room}`;
      await forEachInFlight(present, 64, (m) =>
        tracker.updatePresence(conversation(m.room), m.user),
      );
      const heartbeat = await captureHeartbeat(lab, rollcall, present[0]!);
      populations.push({
        roomSize,
        naiveKeys: Array.from({ length: roomSize }, (_, i) =>
          tracker.presenceKey(conversation(padded("r", i))),
        ),
        commands: {
          noop: ["EVALSHA", noop, ...heartbeat.slice(2)],
          naive: [
            "EVALSHA",
            naive,
            "1",
            tracker.presenceKey(conversation(`r${RANDOM}`)),
            `u${RANDOM}`,
            `${tracker.presenceTtl * 3}`,
          ],
          rollcall: heartbeat,
        },
      });
    }
    lab.release(client);
    // The joins kept their replies; they would expire during the runs and change DBSIZE.
    await lab.dropReplies();
    return new Ceiling(lab, config, populations, await redisBenchmarkVersion());
  }

  get commands(): CeilingCommand[] {
    return this.populations.flatMap(({ roomSize, commands }) =>
      CEILING_SCRIPTS.map((script) => ({ roomSize, script, command: commands[script] })),
    );
  }

  /** Every room size and script once; the order of the scripts turns with each repeat. */
  async round(repeat: number): Promise<CeilingRun[]> {
    const runs: CeilingRun[] = [];
    for (const p of this.populations) {
      for (let i = 0; i < CEILING_SCRIPTS.length; i++) {
        const script = CEILING_SCRIPTS[(i + repeat) % CEILING_SCRIPTS.length]!;
        const run = await benchmarkScript(
          this.lab,
          this.config,
          p.roomSize,
          p.commands[script],
          EXPECTED[script],
        );
        if (script === "naive") await this.checkNaiveUnchanged(p);
        runs.push({ roomSize: p.roomSize, script, repeat, ...run });
      }
    }
    return runs;
  }

  /** The baseline's ZADD adds a user it did not find: every draw must have hit a present one. */
  private async checkNaiveUnchanged(p: Population): Promise<void> {
    const sizes = await Promise.all(p.naiveKeys.map((key) => this.lab.admin.zcard(key)));
    const members = sizes.reduce((a, b) => a + b, 0);
    if (members !== p.roomSize * p.roomSize) {
      throw new Error(`the scripted baseline left ${members} members, not ${p.roomSize}²`);
    }
  }
}

/**
 * Makes everyone present and steady: the joins, then, once Redis's clock has left the last join's
 * millisecond, one more heartbeat each. A connection's first beat after its join is not steady
 * (within the join's millisecond it may be the join resent): redis-benchmark must not meet one.
 */
export async function makeSteady(lab: Lab, rollcall: Rollcall, present: Member[]): Promise<void> {
  const beatAll = () =>
    forEachInFlight(present, 64, (m) => rollcall.heartbeat(m.room, m.user, m.connection));
  await beatAll();
  const joined = await redisMs(lab);
  while ((await redisMs(lab)) <= joined) {
    // Redis's clock moves within a millisecond: TIME again.
  }
  await beatAll();
}

async function redisMs(lab: Lab): Promise<number> {
  const [seconds, micros] = await lab.admin.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * The wire form of a steady heartbeat, seen through MONITOR: EVALSHA, the SHA of the script as the
 * loader built it, and every key and argument. The room's keys and the user then get
 * redis-benchmark's random number (one bucket: every room's keys share the bucket's keys' tag).
 */
export async function captureHeartbeat(
  lab: Lab,
  rollcall: Rollcall,
  member: Member,
  options: { capacity?: number } = {},
): Promise<string[]> {
  const monitor = lab.track(await lab.admin.monitor());
  const seen = new Promise<string[]>((resolve) => {
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (source !== "lua" && args[0]?.toLowerCase() === "evalsha") resolve(args);
    });
  });
  // The connection has run the script already, so ioredis sends EVALSHA rather than EVAL.
  const { joined } = await rollcall.heartbeat(member.room, member.user, member.connection, options);
  const args = await seen;
  lab.release(monitor);
  if (joined) throw new Error("the captured heartbeat joined: it is not a steady one");
  // The scripts derive a room's keys from its name: the name and the user take the random number.
  const random = new Map([
    [member.room, `r${RANDOM}`],
    [member.user, `u${RANDOM}`],
  ]);
  for (const value of random.keys()) {
    if (args.filter((a) => a === value).length !== 1) {
      throw new Error(`cannot find ${value} once in the heartbeat command ${args.join(" ")}`);
    }
  }
  const [loaded] = (await lab.admin.script("EXISTS", args[1]!)) as number[];
  if (loaded !== 1) throw new Error(`script ${args[1]} is not loaded`);
  return args.map((a) => random.get(a) ?? a);
}

/** One room size's figures over the repeats. */
export interface CeilingSummary {
  roomSize: number;
  /** Median Redis time per call, µs, of each script. */
  us: Record<CeilingScript, number>;
  /** rollcall ÷ naive, median of each repeat's pair (they ran side by side). */
  ratio: number;
  /** The same less the floor (TIME only) on both sides: the scripts' own work. */
  workRatio: number;
  /** Best calls/s of each script (noise only slows). */
  opsPerSec: Record<CeilingScript, number>;
  /** redis-server's CPU share during rollcall's best run, and the host's busy cores. */
  rollcallRedisCpu: number;
  rollcallHostCpu: number;
}

export function summarizeCeiling(c: CeilingResults): CeilingSummary[] {
  const sizes = [...new Set(c.runs.map((r) => r.roomSize))];
  return sizes.map((roomSize) => {
    const runs = c.runs.filter((r) => r.roomSize === roomSize);
    const of = (script: CeilingScript) => runs.filter((r) => r.script === script);
    const usOf = (script: CeilingScript) => median(of(script), (r) => r.usPerCall).usPerCall;
    const bestOf = (script: CeilingScript) =>
      of(script).reduce((a, b) => (b.opsPerSec > a.opsPerSec ? b : a));
    const repeats = [...new Set(runs.map((r) => r.repeat))];
    const pair = (repeat: number) => {
      const at = (script: CeilingScript) =>
        runs.find((r) => r.repeat === repeat && r.script === script)!.usPerCall;
      return { noop: at("noop"), naive: at("naive"), rollcall: at("rollcall") };
    };
    const pairs = repeats.map(pair);
    return {
      roomSize,
      us: { noop: usOf("noop"), naive: usOf("naive"), rollcall: usOf("rollcall") },
      ratio: median(
        pairs.map((p) => p.rollcall / p.naive),
        (r) => r,
      ),
      workRatio: median(
        pairs.map((p) => (p.rollcall - p.noop) / (p.naive - p.noop)),
        (r) => r,
      ),
      opsPerSec: {
        noop: bestOf("noop").opsPerSec,
        naive: bestOf("naive").opsPerSec,
        rollcall: bestOf("rollcall").opsPerSec,
      },
      rollcallRedisCpu: bestOf("rollcall").load.redisCpu,
      rollcallHostCpu: bestOf("rollcall").load.hostCpu,
    };
  });
}
