import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import {
  parseEvent,
  Rollcall,
  Sweeper,
  type PassStats,
  type RollcallOptions,
} from "../src/index.js";
import { forEachInFlight } from "./drive.js";
import { members, type Member } from "./population.js";
import type { Lab } from "./lab.js";
import { NaiveTracker } from "../test/kit/naive.js";
import type { Progress } from "./progress.js";
import {
  commandsBetween,
  commandStats,
  histogram,
  median,
  percentiles,
  serverLatency,
  underLoad,
  type Percentiles,
  type ServerLatency,
} from "./stats.js";
import { number, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import type { Row, Section } from "./section.js";

/**
 * The shortest presence window rollcall accepts, so expiries come quickly; no leave grace
 * (whatever the library's default), so that an expiry is a leave, announced by the pass.
 */
const EXPIRING: RollcallOptions = {
  presenceWindowMs: 1_000,
  typingWindowMs: 500,
  leaveGraceMs: 0,
};
/**
 * The expiring deployments of the timed passes: a window whose third (the longest pause of
 * sweeps that is no stall) covers the timed passes of the others (see SweepNotes). At 30 s, one
 * full run in three failed on a loaded host: a pass of 20,000 expirations outlasted 10 s, and the
 * next deployment's connections were held as if Redis had stalled.
 */
const PASSES: RollcallOptions = { ...EXPIRING, presenceWindowMs: 45_000 };
/** Idle rooms: live all along (their heartbeat's window is an hour) and never due. */
const IDLE: RollcallOptions = { presenceWindowMs: 3_600_000, leaveGraceMs: 0 };
/** After the window has passed, a margin for the last heartbeat's round trip. */
const MARGIN_MS = 100;
/** The sweeper runs every bucket at once; the naive sweep gets as many calls in flight. */
const NAIVE_IN_FLIGHT = 16;

export interface SweepRun {
  /** Size of the rooms whose members expire. */
  roomSize: number;
  idleRooms: number;
  expirations: number;
  /** Timed passes; the figures below are the median pass's, but for the worst call. */
  passes: number;
  /** Sweep script calls. */
  calls: number;
  /** Rooms the pass found due (each swept by its own calls). */
  rooms: number;
  durationMs: number;
  expirationsPerSec: number;
  /** redis-server CPU (INFO cpu, user + sys) over the pass, µs per expiration. */
  redisCpuUs: number;
  /** Redis's time in the sweep scripts (INFO commandstats, EVALSHA), µs per expiration. */
  scriptUs: number;
  /** Server time of each sweep script call, µs. */
  callUs: ServerLatency;
  /** The longest sweep script call of all passes, µs. */
  worstCallUs: number;
  /** In the pass of the worst call, the slowest single command but the script calls, µs. */
  slowestOther: { command: string; us: number };
}

export interface NaiveSweepRun {
  idleRooms: number;
  expirations: number;
  /** cleanup_stale must be told every conversation: the caller has to keep the list. */
  conversations: number;
  /** Of the median pass, like the figures below. */
  commands: number;
  durationMs: number;
  expirationsPerSec: number;
  /** redis-server CPU over the pass, µs per expiration. */
  redisCpuUs: number;
}

export interface LeaveLatency {
  connections: number;
  presenceWindowMs: number;
  sweepIntervalMs: number;
  /** Arrival of the leave event minus (last heartbeat + presence window), µs. */
  us: Percentiles;
}

export interface SweepResults {
  /** Room size of the baseline's expiring members, and of rollcall's in the idle-rooms pair. */
  roomSize: number;
  runs: SweepRun[];
  naive: NaiveSweepRun[];
  leave: LeaveLatency;
}

export interface SweepProfile {
  /** Every sweep runs at the Sweeper's default batch. */
  sweep: {
    expirations: number;
    /**
     * Sizes of the rooms whose members expire: the first among every count of idle rooms (and
     * the baseline's), the others among the first count. Big rooms fill the batch.
     */
    roomSizes: number[];
    /** Live rooms with nothing due. */
    idleRooms: number[];
    /** Timed passes per scenario; the median one is reported. */
    passes: number;
  };
  leave: { connections: number; roomSize: number; intervalMs: number };
}

interface Scenario {
  roomSize: number;
  idleRooms: number;
}

function scenarios(p: SweepProfile): Scenario[] {
  const [fewIdle, ...moreIdle] = p.sweep.idleRooms;
  return [
    ...p.sweep.roomSizes.map((roomSize) => ({ roomSize, idleRooms: fewIdle! })),
    ...moreIdle.map((idleRooms) => ({ roomSize: p.sweep.roomSizes[0]!, idleRooms })),
  ];
}

function sweepSteps(p: SweepProfile): number {
  return scenarios(p).length + p.sweep.idleRooms.length + p.sweep.passes + 1;
}

/** A rollcall deployment of its own (its own key prefix) for one scenario. */
interface RollcallSweep extends Scenario {
  gone: Member[];
  rollcall: Rollcall;
  /** A room nobody is in, in each bucket of the deployment (see SweepNotes). */
  quiet: string[];
  sweeper: Sweeper;
  /** The sweeper's own instance: its drains apply the user changes of the leaves it makes. */
  sweeping: Rollcall;
  timed: TimedPass[];
}

interface TimedPass {
  pass: PassStats;
  callUs: ServerLatency;
  redisCpuSeconds: number;
}

/** The baseline's keys for one scenario, its conversations named apart from the others'. */
interface NaiveSweep {
  idleRooms: number;
  gone: Member[];
  conversations: string[];
  timed: TimedNaivePass[];
}

interface TimedNaivePass {
  durationMs: number;
  commands: number;
  redisCpuSeconds: number;
}

/**
 * Every scenario lives side by side in the same Redis, rollcall's as separate deployments and the
 * baseline's under separate conversation names. Each pass makes N connections of every scenario go
 * silent, waits out the window once, and sweeps the scenarios one after the other: all meet the
 * same load on the host, which drifts.
 */
async function benchSweep(
  lab: Lab,
  profile: SweepProfile,
  progress: Progress,
): Promise<SweepResults> {
  const { expirations, roomSizes, passes } = profile.sweep;
  const roomSize = roomSizes[0]!;
  await lab.flush();
  const writer = lab.connect({ enableAutoPipelining: true });
  const rollcallSweeps: RollcallSweep[] = [];
  for (const [i, scenario] of scenarios(profile).entries()) {
    const label = `sweep: rollcall, rooms of ${scenario.roomSize}, ${scenario.idleRooms} idle rooms`;
    rollcallSweeps.push(
      await progress.step(label, () => deploy(lab, writer, `sweep${i}`, scenario, profile)),
    );
  }
  // Heartbeats scored by this process's clock, as the baseline does; the key TTL (3 windows) is
  // long so that no key vanishes while the set-up runs. The sweeper's window decides who is stale.
  const heartbeats = new NaiveTracker(writer, 3_600);
  const naiveSweeps: NaiveSweep[] = [];
  for (const [i, idleRooms] of profile.sweep.idleRooms.entries()) {
    naiveSweeps.push(
      await progress.step(`sweep: seed, ${idleRooms} idle rooms`, async () => {
        const gone = expiring(`seed${i}-busy`, expirations, roomSize);
        const idle = rooms(`seed${i}-idle`, idleRooms);
        await liveNaiveRooms(heartbeats, idle);
        const conversations = [...new Set(gone.map((m) => m.room)), ...idle];
        return { idleRooms, gone, conversations, timed: [] };
      }),
    );
  }
  const naiveSweeper = new NaiveTracker(lab.connect(), PASSES.presenceWindowMs! / 1000);
  for (let pass = 0; pass < passes; pass++) {
    await progress.step(`sweep: pass ${pass + 1}/${passes}`, async () => {
      const noting = new SweepNotes(rollcallSweeps);
      try {
        const ended: number[] = [];
        for (const s of rollcallSweeps) {
          await forEachInFlight(s.gone, 64, (m) =>
            s.rollcall.heartbeat(m.room, m.user, m.connection),
          );
          ended.push(performance.now());
        }
        for (const s of naiveSweeps) {
          await forEachInFlight(s.gone, 64, (m) => heartbeats.heartbeat(m.room, m.user));
        }
        const naiveEnded = performance.now();
        // The joins' kept replies would expire in the background while the passes are timed.
        await lab.dropReplies();
        const window = PASSES.presenceWindowMs!;
        for (const [i, s] of rollcallSweeps.entries()) {
          await sleep(Math.max(0, ended[i]! + window + MARGIN_MS - performance.now()));
          await noting.pause();
          s.timed.push(await timedSweep(lab, s, expirations));
          noting.resume(s);
        }
        // Every deployment is timed: the notes have none left to sweep.
        await sleep(Math.max(0, naiveEnded + window + MARGIN_MS - performance.now()));
        for (const s of naiveSweeps) {
          s.timed.push(await timedNaiveSweep(lab, naiveSweeper, s.conversations, expirations));
        }
      } finally {
        await noting.stop();
      }
    });
  }
  lab.release(writer);
  const leave = await progress.step("sweep: leave latency", () => leaveLatency(lab, profile));
  return {
    roomSize,
    runs: rollcallSweeps.map((s) => summary(s, expirations)),
    naive: naiveSweeps.map((s) => naiveSummary(s, expirations)),
    leave,
  };
}

/**
 * Notes a sweep in every bucket of the deployments not timed yet, every few hundred ms, without
 * expiring anything (a sweep of a room nobody is in): a deployment whose sweeps stopped for a
 * third of its window would take the gap for a stall of Redis and hold its connections another
 * window (lua/include/stall.lua), as a real one does when a deploy stops every sweeper. Paused
 * while a pass is timed, so that the pass's script calls are its own.
 */
class SweepNotes {
  private readonly pending: Set<RollcallSweep>;
  private running = true;
  private paused = false;
  private readonly loop: Promise<void>;

  constructor(sweeps: readonly RollcallSweep[]) {
    this.pending = new Set(sweeps);
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (this.running) {
      for (const s of this.paused ? [] : this.pending) {
        await Promise.all(s.quiet.map((room) => s.rollcall.sweepRoom(room)));
      }
      this.iteration?.();
      await sleep(3 * MARGIN_MS);
    }
  }

  private iteration: (() => void) | undefined;

  /** Resolves once no note is under way and none will start until resume(). */
  async pause(): Promise<void> {
    this.paused = true;
    await new Promise<void>((resolve) => (this.iteration = resolve));
  }

  /** Notes go on, for the deployments still to be timed (not `timed`). */
  resume(timed: RollcallSweep): void {
    this.pending.delete(timed);
    this.paused = false;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

function quietRooms(rollcall: Rollcall): string[] {
  const byBucket = new Map<number, string>();
  for (let i = 0; byBucket.size < rollcall.settings.buckets; i++) {
    const room = `quiet-${i}`;
    const { bucket } = rollcall.layout.room(room);
    if (!byBucket.has(bucket)) byBucket.set(bucket, room);
  }
  return [...byBucket.values()];
}

function expiring(name: string, connections: number, roomSize: number): Member[] {
  return members(Math.ceil(connections / roomSize), roomSize, name).slice(0, connections);
}

function rooms(name: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${name}-${i}`);
}

/**
 * Idle live rooms, and a Sweeper on its own connection, in a deployment of their own. A live
 * room that is not due is one whose next deadline lies ahead: keeping 100,000 rooms so under a
 * 1 s window would take 100,000 heartbeats a second, so an instance with an hour's window makes
 * them present, and the deployment's stored settings are then deleted for the expiring
 * instances to store theirs: the bench's one deliberate misconfiguration (nothing ever beats in
 * those rooms again, and their due entries say an hour).
 */
async function deploy(
  lab: Lab,
  writer: Redis,
  prefix: string,
  scenario: Scenario,
  profile: SweepProfile,
): Promise<RollcallSweep> {
  const idle = new Rollcall(writer, { ...IDLE, prefix });
  const idleRooms = rooms("idle", scenario.idleRooms);
  await forEachInFlight(idleRooms, 64, (room) => idle.heartbeat(room, "u", "c"));
  await lab.admin.del(idle.layout.deployment);
  await lab.dropReplies();
  const sweeping = new Rollcall(lab.connect(), { ...PASSES, prefix });
  const sweeper = new Sweeper(sweeping);
  // Nothing is due yet: this loads the script on the sweeper's connection (ioredis sends EVAL
  // first), so the timed passes run EVALSHA only.
  await sweeper.sweepOnce();
  const rollcall = new Rollcall(writer, { ...PASSES, prefix });
  return {
    ...scenario,
    gone: expiring("busy", profile.sweep.expirations, scenario.roomSize),
    rollcall,
    quiet: quietRooms(rollcall),
    sweeper,
    sweeping,
    timed: [],
  };
}

/**
 * One pass, timed with the user changes of its leaves, which its Sweeper applies after it (in
 * the background): what the pass costs Redis includes them, in users script calls of their own.
 */
async function timedSweep(
  lab: Lab,
  { sweeper, sweeping }: RollcallSweep,
  expirations: number,
): Promise<TimedPass> {
  await lab.collectLuaGarbage();
  const buckets = Array.from({ length: sweeping.settings.buckets }, (_, b) => b);
  const [[pass, callUs], load] = await underLoad(lab.admin, () =>
    serverLatency(lab.admin, "evalsha", async () => {
      const pass = await sweeper.sweepOnce();
      await Promise.all(buckets.map((b) => sweeping.applyUserChanges(b)));
      return pass;
    }),
  );
  if (pass.connections !== expirations || pass.leaves !== expirations) {
    throw new Error(`sweep settled ${JSON.stringify(pass)}, expected ${expirations} leaves`);
  }
  // Beside the pass's own calls, Redis ran the users script calls that applied its leaves.
  if (callUs.calls < pass.calls) {
    throw new Error(`the pass made ${pass.calls} script calls, Redis ran ${callUs.calls}`);
  }
  return { pass, callUs, redisCpuSeconds: load.redisCpu * load.seconds };
}

/**
 * The baseline's sweep: cleanup_stale, then the leaves, for every conversation the caller knows of,
 * since the baseline cannot find the ones with zombies.
 */
async function timedNaiveSweep(
  lab: Lab,
  tracker: NaiveTracker,
  conversations: string[],
  expirations: number,
): Promise<TimedNaivePass> {
  let removed = 0;
  const before = await commandStats(lab.admin);
  const [durationMs, load] = await underLoad(lab.admin, async () => {
    const started = performance.now();
    await forEachInFlight(conversations, NAIVE_IN_FLIGHT, async (conversation) => {
      const stale = await tracker.sweep(conversation);
      removed += stale;
    });
    return performance.now() - started;
  });
  const ran = commandsBetween(before, await commandStats(lab.admin));
  if (removed !== expirations) throw new Error(`naive sweep removed ${removed} of ${expirations}`);
  return {
    durationMs,
    commands: [...ran.values()].reduce((sum, c) => sum + c.calls, 0),
    redisCpuSeconds: load.redisCpu * load.seconds,
  };
}

/** The median pass by Redis CPU (what the flatness target compares), the worst call of all. */
function summary(s: RollcallSweep, expirations: number): SweepRun {
  const { pass, callUs, redisCpuSeconds } = median(s.timed, (t) => t.redisCpuSeconds);
  const worstPass = s.timed.reduce((a, b) => (b.callUs.max > a.callUs.max ? b : a));
  return {
    roomSize: s.roomSize,
    idleRooms: s.idleRooms,
    expirations,
    passes: s.timed.length,
    calls: pass.calls,
    rooms: pass.rooms,
    durationMs: pass.durationMs,
    expirationsPerSec: expirations / (pass.durationMs / 1000),
    redisCpuUs: (redisCpuSeconds * 1e6) / expirations,
    scriptUs: callUs.usec / expirations,
    callUs,
    worstCallUs: worstPass.callUs.max,
    slowestOther: worstPass.callUs.slowestOther,
  };
}

function naiveSummary(s: NaiveSweep, expirations: number): NaiveSweepRun {
  const { durationMs, commands, redisCpuSeconds } = median(s.timed, (t) => t.redisCpuSeconds);
  return {
    idleRooms: s.idleRooms,
    expirations,
    conversations: s.conversations.length,
    commands,
    durationMs,
    expirationsPerSec: expirations / (durationMs / 1000),
    redisCpuUs: (redisCpuSeconds * 1e6) / expirations,
  };
}

/**
 * One present user per idle conversation, scored an hour ahead so that the short window of the
 * sweep leaves them live (a live heartbeat would have to land within the last second).
 */
async function liveNaiveRooms(tracker: NaiveTracker, conversations: string[]): Promise<void> {
  const score = Date.now() / 1000 + 3_600;
  await forEachInFlight(conversations, 64, async (c) => {
    await tracker.redis.zadd(tracker.presenceKey(c), score, "u");
    await tracker.redis.expire(tracker.presenceKey(c), tracker.presenceTtl * 3);
  });
}

/**
 * Connections that go silent, a running Sweeper at its interval and a subscriber: how late after
 * the window each leave arrives. Heartbeats are spread over one interval so that the deadlines
 * fall at every phase of the sweeper's cycle.
 */
async function leaveLatency(lab: Lab, profile: SweepProfile): Promise<LeaveLatency> {
  const { connections, roomSize, intervalMs } = profile.leave;
  const windowMs = EXPIRING.presenceWindowMs!;
  await lab.flush();
  const quiet = expiring("quiet", connections, roomSize);
  const rollcall = new Rollcall(lab.connect({ enableAutoPipelining: true }), EXPIRING);
  const lastBeat = new Map<string, number>();
  const h = histogram();
  const subscriber = lab.connect();
  let waiting = connections;
  const sweeper = new Sweeper(new Rollcall(lab.connect(), EXPIRING), { intervalMs });
  let timer: NodeJS.Timeout | undefined;
  const allLeft = new Promise<void>((resolve, reject) => {
    sweeper.on("failed", reject);
    timer = setTimeout(
      () => reject(new Error(`${waiting} leaves missing`)),
      windowMs + 3 * intervalMs + 10_000,
    );
    subscriber.on("smessage", (_channel: string, message: string) => {
      const event = parseEvent(message);
      if (event.type !== "leave") return;
      const beat = lastBeat.get(`${event.room} ${event.user}`);
      if (beat === undefined) return reject(new Error(`leave of an unknown member: ${message}`));
      // The reply comes a little after the script ran: clamp the sub-millisecond early cases.
      h.recordValue(Math.max(0, Math.round((performance.now() - beat - windowMs) * 1000)));
      if (--waiting === 0) resolve();
    });
  });
  await subscriber.ssubscribe(...new Set(quiet.map((m) => rollcall.channel(m.room))));
  const beatInWaves = async () => {
    const waves = 20;
    const perWave = Math.ceil(connections / waves);
    for (let w = 0; w < waves; w++) {
      await Promise.all(
        quiet.slice(w * perWave, (w + 1) * perWave).map(async (m) => {
          await rollcall.heartbeat(m.room, m.user, m.connection);
          lastBeat.set(`${m.room} ${m.user}`, performance.now());
        }),
      );
      await sleep(intervalMs / waves);
    }
  };
  sweeper.start();
  try {
    await Promise.all([allLeft, beatInWaves()]);
  } finally {
    clearTimeout(timer);
    await sweeper.stop();
  }
  return {
    connections,
    presenceWindowMs: windowMs,
    sweepIntervalMs: intervalMs,
    us: percentiles(h),
  };
}

/** The same expirations, in rooms of the same size, among few and many idle rooms. */
function idleRoomsPair(s: SweepResults) {
  const pair = s.runs.filter((run) => run.roomSize === s.roomSize);
  return { few: pair[0]!, many: pair.at(-1)! };
}

function sweepSection(s: SweepResults): string {
  const l = s.leave;
  return [
    "## Sweep",
    "",
    `Each pass, ${number(s.runs[0]?.expirations ?? 0)} connections (full rooms of the size ` +
      "shown) go silent under a 1 s presence window, among idle live rooms that have nothing " +
      "due (a deadline an hour ahead); one `Sweeper.sweepOnce()` at its default batch then " +
      "settles them all: per bucket, one `sweep` script call settles the rooms due, the longest " +
      "overdue first, at most a batch of members and 64 rooms per call, and calls again while " +
      "more is due. " +
      "Every scenario lives side " +
      "by side in the same Redis (rollcall's as deployments with their own key prefix, the " +
      "baseline's under their own conversation names) and each pass sweeps them one after the " +
      `other, so all meet the same load on the host. Passes: ${s.runs[0]?.passes ?? 0}; the ` +
      "median pass by Redis CPU is shown, with the worst script call of all passes. *Redis CPU* " +
      "is redis-server's used_cpu_user + used_cpu_sys over the pass (INFO cpu), *script* the " +
      "time in EVALSHA (INFO commandstats), both per expiration; a pass is timed with the users " +
      "script calls that apply its leaves' user changes after it (users' status). Script call " +
      "times are Redis's own (INFO latencystats), every sweep and users call: SLOWLOG at 0 µs " +
      "would also log every command the script runs. Redis times a call by the clock: a call " +
      "during which the host did not run Redis counts that time too, and so does any command " +
      "it was in. The slowest single command the scripts ran in the worst call's pass is noted " +
      "beside it: most are O(1) (TIME, HGET, HINCRBY, …), and one of those that took " +
      "milliseconds is a stall of the host (a DEL of a room's keys or a ZRANGE grows with its " +
      "data).",
    "",
    table(
      [
        "room size",
        "idle rooms",
        "expirations",
        "rooms due",
        "script calls",
        "pass ms",
        "expirations/s",
        "Redis CPU µs / expiration",
        "script µs / expiration",
        "call p50 µs",
        "call p99 µs",
        "worst call µs",
      ],
      s.runs.map((run) => [
        number(run.roomSize),
        number(run.idleRooms),
        number(run.expirations),
        number(run.rooms),
        number(run.calls),
        number(run.durationMs),
        number(run.expirationsPerSec),
        number(run.redisCpuUs, 1),
        number(run.scriptUs, 1),
        number(run.callUs.p50),
        number(run.callUs.p99),
        number(run.worstCallUs),
      ]),
    ),
    "",
    `The baseline's sweep over the same expirations in rooms of ${s.roomSize}: \`cleanup_stale\` ` +
      "and a PUBLISH per leave, for " +
      "every conversation, since it cannot find the ones with zombies (16 calls in flight, as " +
      "the Sweeper runs its 16 buckets at once):",
    "",
    table(
      [
        "idle rooms",
        "conversations named",
        "expirations",
        "commands",
        "pass ms",
        "expirations/s",
        "Redis CPU µs / expiration",
      ],
      s.naive.map((run) => [
        number(run.idleRooms),
        number(run.conversations),
        number(run.expirations),
        number(run.commands),
        number(run.durationMs),
        number(run.expirationsPerSec),
        number(run.redisCpuUs, 1),
      ]),
    ),
    "",
    idleRoomsVerdict(s),
    "",
    `### Leave latency (ms): ${number(l.connections)} connections go silent, a Sweeper runs ` +
      `every ${number(l.sweepIntervalMs)} ms, window ${number(l.presenceWindowMs)} ms`,
    "",
    "Arrival of the leave at a subscriber minus (last heartbeat + presence window):",
    "",
    table(PERCENTILES, [percentileCells(l.us, 1000)]),
  ].join("\n");
}

/** The same expirations among few and many idle rooms: rollcall's cost must not grow. */
function idleRoomsVerdict(s: SweepResults): string {
  const { few, many } = idleRoomsPair(s);
  const seedFew = s.naive[0]!;
  const seedMany = s.naive.at(-1)!;
  const change = (from: number, to: number, digits = 0) =>
    `${number(from, digits)} → ${number(to, digits)} (${ratio(to / from)})`;
  return (
    `Idle rooms ${number(few.idleRooms)} → ${number(many.idleRooms)}, expirations in rooms of ` +
    `${number(few.roomSize)}: ` +
    `rollcall's Redis CPU per expiration ${change(few.redisCpuUs, many.redisCpuUs, 1)} µs, ` +
    `its script time per expiration ${change(few.scriptUs, many.scriptUs, 1)} µs, its ` +
    `expirations/s ${change(few.expirationsPerSec, many.expirationsPerSec)}; the baseline's ` +
    `Redis CPU per expiration ${change(seedFew.redisCpuUs, seedMany.redisCpuUs, 1)} µs, its ` +
    `expirations/s ${change(seedFew.expirationsPerSec, seedMany.expirationsPerSec)}.`
  );
}

function rows(s: SweepResults): Row[] {
  const { few, many } = idleRoomsPair(s);
  const worst = s.runs.reduce((a, b) => (b.worstCallUs > a.worstCallUs ? b : a));
  const pairRuns = s.runs.filter((run) => run.roomSize === s.roomSize);
  return [
    {
      name:
        `sweep: Redis CPU per expiration, ${number(many.idleRooms)} vs ` +
        `${number(few.idleRooms)} idle rooms ≤ 1.3×`,
      value: many.redisCpuUs / few.redisCpuUs,
      unit: "×",
      digits: 2,
      note:
        `${number(many.redisCpuUs, 1)} vs ${number(few.redisCpuUs, 1)} µs; ` +
        `script time ${ratio(many.scriptUs / few.scriptUs)}`,
      target: { op: "≤", limit: 1.3 },
    },
    {
      name: "sweep: worst script call at the default batch ≤ 1 ms",
      // Redis measures wall time: a call preempted by another process on the host counts long.
      value: worst.worstCallUs,
      unit: "µs",
      note:
        `rooms of ${number(worst.roomSize)}, p99 of its passes ${number(worst.callUs.p99)} µs; ` +
        `worst in rooms of ${number(s.roomSize)}: ` +
        `${number(Math.max(...pairRuns.map((run) => run.worstCallUs)))} µs; the slowest ` +
        `single command the scripts ran in its pass: ` +
        `${worst.slowestOther.command.toUpperCase()} ${number(worst.slowestOther.us)} µs`,
      target: { op: "≤", limit: 1_000 },
    },
  ];
}

/** Expirations settled by the Sweeper among idle rooms, beside the baseline's; leave latency. */
export const sweep: Section<SweepProfile, SweepResults> = {
  name: "sweep",
  profiles: {
    full: {
      sweep: {
        expirations: 20_000,
        roomSizes: [5, 128, 1_000],
        idleRooms: [1_000, 100_000],
        passes: 3,
      },
      leave: { connections: 2_000, roomSize: 5, intervalMs: 1_000 },
    },
    smoke: {
      sweep: { expirations: 300, roomSizes: [5, 128, 1_000], idleRooms: [100, 2_000], passes: 1 },
      leave: { connections: 100, roomSize: 5, intervalMs: 250 },
    },
  },
  steps: sweepSteps,
  run: benchSweep,
  report: sweepSection,
  rows,
};
