import { Rollcall, type RollcallOptions } from "../src/index.js";
import { HEARTBEAT_BATCH } from "../src/engine/rollcall.js";
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
import { number, percent, ratio, table } from "./format.js";
import { median } from "./stats.js";

/**
 * What redis-benchmark runs, in the same run and side by side: `noop` a script that only reads
 * the time (the floor of any script call with rollcall's keys and arguments), `naive` the
 * baseline's update_presence as one script, `rollcall` the real steady heartbeat.
 */
export const CEILING_SCRIPTS = ["noop", "naive", "rollcall"] as const;
export type CeilingScript = (typeof CEILING_SCRIPTS)[number];

/** A gateway's call: one heartbeatMany of many steady connections, rooms of the size run. */
export const BATCHED = "batched";

export interface CeilingConfig extends BenchmarkConfig {
  /** R rooms of R users for each R. */
  roomSizes: number[];
}

export interface CeilingRun extends BenchmarkRun {
  roomSize: number;
  script: CeilingScript | typeof BATCHED;
  /** Heartbeats per call: 1, or the batch's entries. */
  heartbeats: number;
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

/** What a steady heartbeat runs: the room's meta and the record in one HMGET, the patched
 * record's HSET, nothing else. */
export const STEADY_HEARTBEAT: Expected = { time: 1, hmget: 1, hset: 1 };

/** The commands each call may run: a rollcall heartbeat that was not steady fails the run. */
const EXPECTED: Record<CeilingScript, Expected> = {
  noop: { time: 1 },
  naive: { time: 1, zscore: 1, zadd: 1, expire: 1 },
  rollcall: STEADY_HEARTBEAT,
};

/**
 * One bucket, so every room shares one hash tag, as in a deployment's busiest slot. An hour's
 * window so nobody expires, and the longest key TTL so that no heartbeat of the run crosses into
 * a new quarter of it (that one would refresh the TTLs, and fail the run as not steady).
 */
export const DEPLOYMENT: RollcallOptions = {
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
  /** The first HEARTBEAT_BATCH present connections in one heartbeatMany, and its rooms. */
  batched: { command: string[]; heartbeats: number; rooms: number };
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
      const batch = present.slice(0, HEARTBEAT_BATCH);
      const batched = {
        command: await captureEvalsha(lab, () => rollcall.heartbeatMany(batch)),
        heartbeats: batch.length,
        rooms: new Set(batch.map((m) => m.room)).size,
      };
      populations.push({
        batched,
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
        runs.push({ roomSize: p.roomSize, script, repeat, heartbeats: 1, ...run });
      }
      const { command, heartbeats, rooms } = p.batched;
      // Each room of the batch: its meta and records in one HMGET, its patched records in one HSET.
      const expected = { time: 1, hmget: rooms, hset: rooms };
      const run = await benchmarkScript(this.lab, this.config, 1, command, expected);
      runs.push({ roomSize: p.roomSize, script: BATCHED, repeat, heartbeats, ...run });
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
export async function makeSteady(
  lab: Lab,
  rollcall: Rollcall,
  present: readonly Member[],
): Promise<void> {
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
  let joined = false;
  const args = await captureEvalsha(lab, async () => {
    ({ joined } = await rollcall.heartbeat(member.room, member.user, member.connection, options));
  });
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
  return args.map((a) => random.get(a) ?? a);
}

/** How ioredis reports a reply it expected no command for. */
const STRAY_REPLY = /^Command queue state error/;

/**
 * The EVALSHA a call sends, seen through MONITOR. The connection must have run the script
 * already, so that ioredis sends EVALSHA rather than EVAL; the script must stay loaded.
 */
export async function captureEvalsha(lab: Lab, call: () => Promise<unknown>): Promise<string[]> {
  // Redis.monitor(), with an error listener from the start: other clients' commands (a join's
  // drain of user changes runs on in the background) can reach the monitor with MONITOR's reply,
  // before ioredis knows it is monitoring, or as it closes; ioredis reports each as a stray reply.
  // Nothing is captured from those: only the call's own command, sent once monitoring.
  const monitor = lab.track(lab.admin.duplicate({ monitor: true, lazyConnect: false }));
  let fail: (error: Error) => void = () => {};
  monitor.on("error", (error: Error) => {
    if (!STRAY_REPLY.test(error.message)) fail(error);
  });
  await new Promise((resolve, reject) => {
    fail = reject;
    monitor.once("monitoring", resolve);
  });
  const seen = new Promise<string[]>((resolve, reject) => {
    fail = reject;
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (source !== "lua" && args[0]?.toLowerCase() === "evalsha") resolve(args);
    });
  });
  await call();
  const args = await seen;
  lab.release(monitor);
  const [loaded] = (await lab.admin.script("EXISTS", args[1]!)) as number[];
  if (loaded !== 1) throw new Error(`script ${args[1]} is not loaded`);
  return args;
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
  batched: BatchedSummary;
}

/** A batch of steady heartbeats in one call against the baseline's work scripted, per heartbeat. */
export interface BatchedSummary {
  heartbeats: number;
  /** Median script time per heartbeat. */
  us: number;
  /** Median redis-server CPU (user + sys, I/O included) per heartbeat, and the baseline's per
   * call; their ratio is the median of each repeat's pair. */
  redisCpuUs: number;
  naiveRedisCpuUs: number;
  cpuRatio: number;
  /** Best heartbeats/s (calls/s × entries). */
  heartbeatsPerSec: number;
}

/** redis-server's CPU per heartbeat of a run, µs. */
function redisCpuUs(run: CeilingRun, requests: number): number {
  return (run.load.redisCpu * run.load.seconds * 1e6) / (requests * run.heartbeats);
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
      batched: summarizeBatched(runs, c.requests),
    };
  });
}

function summarizeBatched(runs: readonly CeilingRun[], requests: number): BatchedSummary {
  const batched = runs.filter((r) => r.script === BATCHED);
  const naive = runs.filter((r) => r.script === "naive");
  const cpu = (r: CeilingRun) => redisCpuUs(r, requests);
  const pairs = batched.map((b) => cpu(b) / cpu(naive.find((n) => n.repeat === b.repeat)!));
  const heartbeats = batched[0]!.heartbeats;
  return {
    heartbeats,
    us: median(batched, (r) => r.usPerCall).usPerCall / heartbeats,
    redisCpuUs: cpu(median(batched, cpu)),
    naiveRedisCpuUs: cpu(median(naive, cpu)),
    cpuRatio: median(pairs, (r) => r),
    heartbeatsPerSec: Math.max(...batched.map((r) => r.opsPerSec * heartbeats)),
  };
}

export const SCRIPT_LABEL: Record<CeilingScript, string> = {
  noop: "TIME only",
  naive: "baseline's work scripted",
  rollcall: "rollcall heartbeat",
};

/** The ceiling's report: redis-benchmark running each script, by room size. */
export function ceilingSection(c: CeilingResults, cores: number): string {
  const summary = summarizeCeiling(c);
  const shown = c.commands.filter((cmd) => cmd.roomSize === (summary[1] ?? summary[0])?.roomSize);
  const repeats = new Set(c.runs.map((run) => run.repeat)).size;
  return [
    "## Ceiling: redis-benchmark, Redis CPU per heartbeat",
    "",
    `${c.redisBenchmark}, \`-c ${c.clients} -P ${number(c.pipeline)} -n ${number(c.requests)}\`, ` +
      `three scripts per room size R, run after each of the ${repeats} throughput repeats ` +
      "(interleaved, the order turning each repeat). R rooms of R users in a deployment of one " +
      "bucket (every room under one hash tag); redis-benchmark draws each `__rand_int__` on its " +
      "own below R, so the room's keys and the user carry one each. *rollcall heartbeat* is the " +
      "command of a real steady heartbeat captured with MONITOR; *baseline's work scripted* is " +
      "the baseline's update_presence as one script (TIME, ZSCORE, ZADD, EXPIRE on the room's " +
      "sorted set); *TIME only* is a script that only reads the time, called with rollcall's " +
      "keys and arguments: the floor of any call. Each run starts with CONFIG RESETSTAT; µs per " +
      "call is INFO commandstats' EVALSHA usec_per_call, median of the repeats; every run is " +
      "checked (each call ran exactly its script's commands, no key was added).",
    "",
    "The commands, R = " + (shown[0]?.roomSize ?? "?") + ":",
    "",
    "```",
    ...shown.map((cmd) => cmd.command.map((a) => (a === "" ? '""' : a)).join(" ")),
    "```",
    "",
    table(
      [
        "R",
        "users",
        ...CEILING_SCRIPTS.map((s) => `${SCRIPT_LABEL[s]} µs`),
        "rollcall ÷ baseline scripted (≤ 1.25×)",
        "same, less TIME only",
        ...CEILING_SCRIPTS.map((s) => `${SCRIPT_LABEL[s]} /s`),
        "redis-server CPU (rollcall)",
        "host CPU, cores (rollcall)",
      ],
      summary.map((s) => [
        number(s.roomSize),
        number(s.roomSize * s.roomSize),
        ...CEILING_SCRIPTS.map((script) => number(s.us[script], 2)),
        ratio(s.ratio),
        ratio(s.workRatio),
        ...CEILING_SCRIPTS.map((script) => number(s.opsPerSec[script])),
        percent(s.rollcallRedisCpu),
        `${number(s.rollcallHostCpu, 2)} of ${cores}`,
      ]),
    ),
    "",
    "Calls/s are the best run's. The ratio is the median of each repeat's pair, measured side " +
      "by side. Script time is what each call costs Redis's one core; calls/s adds what Redis " +
      "spends reading requests and writing replies, the same for every script.",
  ].join("\n");
}
