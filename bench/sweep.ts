import {
  parseEvent,
  Rollcall,
  Sweeper,
  type PassStats,
  type RollcallOptions,
} from "../src/rollcall.js";
import { forEachInFlight, sleep } from "./drive.js";
import { members, type Member } from "./heartbeat.js";
import type { Lab } from "./lab.js";
import { NaiveTracker } from "./naive.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";
import {
  commandsBetween,
  commandStats,
  histogram,
  median,
  percentiles,
  serverLatency,
  type Percentiles,
  type ServerLatency,
} from "./stats.js";

/** The shortest presence window rollcall accepts, so expiries come quickly. */
const EXPIRING: RollcallOptions = { presenceWindowMs: 1_000, typingWindowMs: 500 };
/** Idle rooms: live all along (their heartbeat's window is an hour) and never due. */
const IDLE: RollcallOptions = { presenceWindowMs: 3_600_000 };
/** After the window has passed, a margin for the last heartbeat's round trip. */
const MARGIN_MS = 100;
/** The sweeper runs every bucket at once; the naive sweep gets as many calls in flight. */
const NAIVE_IN_FLIGHT = 16;

export type Batch = number | "default";

export interface SweepRun {
  /** "default": the Sweeper's own default batch. */
  batch: Batch;
  idleRooms: number;
  expirations: number;
  /** Timed passes; the figures below are the median pass's, but for the worst call. */
  passes: number;
  calls: number;
  durationMs: number;
  expirationsPerSec: number;
  /** Server time of each sweep script call, µs. */
  callUs: ServerLatency;
  /** The longest sweep script call of all passes, µs. */
  worstCallUs: number;
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
}

export interface LeaveLatency {
  connections: number;
  presenceWindowMs: number;
  sweepIntervalMs: number;
  /** Arrival of the leave event minus (last heartbeat + presence window), µs. */
  us: Percentiles;
}

export interface SweepResults {
  roomSize: number;
  runs: SweepRun[];
  naive: NaiveSweepRun[];
  leave: LeaveLatency;
}

function scenarios(p: Profile): { batch: Batch; idleRooms: number }[] {
  const [fewIdle, ...moreIdle] = p.sweep.idleRooms;
  return [
    ...p.sweep.batches.map((batch) => ({ batch, idleRooms: fewIdle! })),
    ...moreIdle.map((idleRooms) => ({ batch: "default" as const, idleRooms })),
  ];
}

export function sweepSteps(p: Profile): number {
  return scenarios(p).length + p.sweep.idleRooms.length + 1;
}

export async function benchSweep(
  lab: Lab,
  profile: Profile,
  progress: Progress,
): Promise<SweepResults> {
  const runs: SweepRun[] = [];
  for (const scenario of scenarios(profile)) {
    const label = `sweep: batch ${scenario.batch}, ${scenario.idleRooms} idle rooms`;
    runs.push(await progress.step(label, () => sweepRun(lab, profile, scenario)));
  }
  const naive: NaiveSweepRun[] = [];
  for (const idleRooms of profile.sweep.idleRooms) {
    const label = `sweep: naive cleanup_stale, ${idleRooms} idle rooms`;
    naive.push(await progress.step(label, () => naiveSweep(lab, profile, idleRooms)));
  }
  const leave = await progress.step("sweep: leave latency", () => leaveLatency(lab, profile));
  return { roomSize: profile.sweep.roomSize, runs, naive, leave };
}

function expiring(connections: number, roomSize: number): Member[] {
  return members(Math.ceil(connections / roomSize), roomSize, "busy").slice(0, connections);
}

/** N connections expire among live idle rooms; a Sweeper pass settles them, timed, and again. */
async function sweepRun(
  lab: Lab,
  profile: Profile,
  { batch, idleRooms }: { batch: Batch; idleRooms: number },
): Promise<SweepRun> {
  const { expirations, roomSize, passes } = profile.sweep;
  await lab.flush();
  const writer = lab.connect({ enableAutoPipelining: true });
  const idle = new Rollcall(writer, IDLE);
  await forEachInFlight(rooms("idle", idleRooms), 64, (room) => idle.heartbeat(room, "u", "c"));
  const sweeper = new Sweeper(
    new Rollcall(lab.connect(), EXPIRING),
    batch === "default" ? {} : { batch },
  );
  // Nothing is due yet: this loads the script on the sweeper's connection, so the timed passes
  // run EVALSHA only.
  await sweeper.sweepOnce();
  const rollcall = new Rollcall(writer, EXPIRING);
  const gone = expiring(expirations, roomSize);
  const timed: { pass: PassStats; callUs: ServerLatency }[] = [];
  for (let i = 0; i < passes; i++) {
    await forEachInFlight(gone, 64, (m) => rollcall.heartbeat(m.room, m.user, m.connection));
    await sleep(EXPIRING.presenceWindowMs! + MARGIN_MS);
    const [pass, callUs] = await serverLatency(lab.admin, "evalsha", () => sweeper.sweepOnce());
    if (pass.connections !== expirations || pass.leaves !== expirations) {
      throw new Error(`sweep settled ${JSON.stringify(pass)}, expected ${expirations} leaves`);
    }
    timed.push({ pass, callUs });
  }
  lab.release(writer);
  const { pass, callUs } = median(timed, (t) => t.pass.durationMs);
  return {
    batch,
    idleRooms,
    expirations,
    passes,
    calls: pass.calls,
    durationMs: pass.durationMs,
    expirationsPerSec: expirations / (pass.durationMs / 1000),
    callUs,
    worstCallUs: Math.max(...timed.map((t) => t.callUs.max)),
  };
}

function rooms(name: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${name}-${i}`);
}

/**
 * The seed's sweep over the same expirations and idle rooms: cleanup_stale, then the leaves, for
 * every conversation the caller knows of, since the seed cannot find the ones with zombies.
 */
async function naiveSweep(lab: Lab, profile: Profile, idleRooms: number): Promise<NaiveSweepRun> {
  const { expirations, roomSize, passes } = profile.sweep;
  await lab.flush();
  const writer = lab.connect({ enableAutoPipelining: true });
  // Heartbeats scored by this process's clock, as the seed does; the key TTL (3 windows) is long
  // so that no key vanishes while the set-up runs. The sweeper's window decides who is stale.
  const heartbeats = new NaiveTracker(writer, 3_600);
  const gone = expiring(expirations, roomSize);
  const idle = rooms("idle", idleRooms);
  await liveNaiveRooms(heartbeats, idle);
  const sweeper = new NaiveTracker(lab.connect(), EXPIRING.presenceWindowMs! / 1000);
  const conversations = [...new Set(gone.map((m) => m.room)), ...idle];
  const timed: { durationMs: number; commands: number }[] = [];
  for (let i = 0; i < passes; i++) {
    await forEachInFlight(gone, 64, (m) => heartbeats.heartbeat(m.room, m.user));
    await sleep(EXPIRING.presenceWindowMs! + MARGIN_MS);
    let removed = 0;
    const before = await commandStats(lab.admin);
    const started = performance.now();
    await forEachInFlight(conversations, NAIVE_IN_FLIGHT, async (conversation) => {
      const stale = await sweeper.sweep(conversation);
      removed += stale;
    });
    const durationMs = performance.now() - started;
    const ran = commandsBetween(before, await commandStats(lab.admin));
    if (removed !== expirations)
      throw new Error(`naive sweep removed ${removed} of ${expirations}`);
    timed.push({ durationMs, commands: [...ran.values()].reduce((sum, c) => sum + c.calls, 0) });
  }
  lab.release(writer);
  const { durationMs, commands } = median(timed, (t) => t.durationMs);
  return {
    idleRooms,
    expirations,
    conversations: conversations.length,
    commands,
    durationMs,
    expirationsPerSec: expirations / (durationMs / 1000),
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
async function leaveLatency(lab: Lab, profile: Profile): Promise<LeaveLatency> {
  const { connections, roomSize, intervalMs } = profile.leave;
  const windowMs = EXPIRING.presenceWindowMs!;
  await lab.flush();
  const quiet = expiring(connections, roomSize);
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
