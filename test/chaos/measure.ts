/**
 * What a bad day did to presence, from what a bad-days run recorded: the writers' connections
 * and the joins their calls reported, the events the observers saw, the replicas, and the rooms
 * as roster() lists them at the end.
 */
import type { PresenceEvent, Rollcall, Roster, RoomWatch } from "../../src/index.js";
import { compareIds } from "../kit/audit.js";
import { sleep } from "../kit/wait.js";
import { codeOf, membersOf, Tally, type Observers } from "./observers.js";

/** A writer heartbeated this user's connection (its only one) from `from` until `to`, ms. */
export interface Hold {
  room: string;
  user: string;
  from: number;
  to: number;
}

/** What a run recorded, for `measure`. */
export interface Recorded {
  rc: Rollcall;
  rooms: readonly string[];
  /** The log is on: the consumer saw every event. */
  log: boolean;
  observers: Observers;
  sampler: ReplicaSampler;
  /** By `${room}/${user}`. */
  holds: ReadonlyMap<string, Hold>;
  /** The joins the writers' calls reported, by `${epoch}/${room}/${seq}`. */
  reported: ReadonlySet<string>;
  /** The writers' refusals, by op and code. */
  refused: Tally;
  sweepsFailed: Tally;
  answered: number;
}

export interface Measures {
  answered: number;
  joins: number;
  leaves: number;
  liveLeaves: number;
  lostByEvents: number;
  lostByReplicas: number;
  /** Samples of synced replicas, those unlike roster() during and after the condition, the
   * longest such a replica stayed (ms), and the rooms whose replica is at the end. */
  synced: { samples: number; during: number; after: number; longestMs: number; end: number };
  unreportedJoins: number;
  refused: Tally;
  sweepsFailed: Tally;
  readsFailed: Tally;
  /** Members roster() still lists at the end. */
  leftInRedis: number;
  unhandled: number;
  problems: string[];
}

const keyOf = (e: { epoch: string; room: string; seq: number }) => `${e.epoch}/${e.room}/${e.seq}`;

export async function measure(run: Recorded, problems: string[]): Promise<Measures> {
  const { observers } = run;
  const rosters = new Map<string, Roster["members"]>();
  for (const room of run.rooms) {
    rosters.set(
      room,
      (await run.rc.rosterPages(room)).flatMap((page) => page.members),
    );
  }
  const listed = (room: string, user: string) => rosters.get(room)!.some((m) => m.user === user);

  // Every event seen, once: the log (in each bucket's order) and pub/sub.
  const logged = [...observers.handled]
    .sort((a, b) => a.bucket - b.bucket || compareIds(a.id, b.id))
    .map((l) => l.event);
  const events = new Map<string, PresenceEvent>();
  for (const e of [...logged, ...observers.pubsub]) events.set(keyOf(e), e);
  const joins = [...events.values()].filter((e) => e.type === "join");
  const leaves = [...events.values()].filter((e) => e.type === "leave");
  const liveLeaves = leaves.filter((e) => {
    const hold = run.holds.get(`${e.room}/${e.user}`);
    return hold !== undefined && e.at < hold.to;
  });

  // Present by the events (the log misses nothing; pub/sub when it is off), gone from Redis.
  const present = new Map<string, PresenceEvent>();
  for (const e of run.log ? logged : observers.pubsub) {
    if (e.type === "join" || e.type === "leave") present.set(`${e.room}/${e.user}`, e);
  }
  const lostByEvents = [...present.values()].filter(
    (e) => e.type === "join" && !listed(e.room, e.user),
  ).length;

  let lostByReplicas = 0;
  let syncedAtEnd = 0;
  for (const [room, watch] of observers.watches) {
    lostByReplicas += watch.roster.members.filter((m) => !listed(room, m.user)).length;
    if (watch.synced && membersOf(watch.roster) !== membersOf({ members: rosters.get(room)! })) {
      syncedAtEnd++;
    }
  }

  const readsFailed = new Tally();
  readsFailed.addAll(Object.fromEntries(run.sampler.readsFailed.counts));
  readsFailed.addAll(Object.fromEntries(observers.errors.counts));
  return {
    answered: run.answered,
    joins: joins.length,
    leaves: leaves.length,
    liveLeaves: liveLeaves.length,
    lostByEvents,
    lostByReplicas,
    synced: { ...run.sampler.counts, end: syncedAtEnd },
    unreportedJoins: joins.filter((e) => !run.reported.has(keyOf(e))).length,
    refused: run.refused,
    sweepsFailed: run.sweepsFailed,
    readsFailed,
    leftInRedis: [...rosters.values()].reduce((n, members) => n + members.length, 0),
    unhandled: 0,
    problems,
  };
}

/**
 * How long a replica may stay behind a roster() that moved on before the difference counts: an
 * event published before that roster() was read reaches a subscriber on loopback well within it.
 */
const STUCK_MS = 1_000;

/** What a room's replica and roster() were when they first differed at different seqs. */
interface Track {
  epoch: string;
  seq: number;
  listed: string;
  /** When the roster() read that showed it returned. */
  since: number;
}

/**
 * Samples, room by room, whether each replica that claims `synced` lists what roster() lists:
 * at the same seq they must be equal; past the seq the replica is at, roster() may be ahead of
 * events still on their way, so a difference counts once it has lasted STUCK_MS with the replica
 * unchanged and roster() listing the same.
 */
export class ReplicaSampler {
  phase: "during" | "after" = "during";
  readonly counts = { samples: 0, during: 0, after: 0, longestMs: 0 };
  readonly readsFailed = new Tally();
  private readonly tracks = new Map<string, Track>();
  /** Since when each room's replica has differed, sample after sample. */
  private readonly streaks = new Map<string, number>();
  private loop: Promise<void> | undefined;
  private stopping = false;

  constructor(
    private readonly rc: Rollcall,
    private readonly watches: ReadonlyMap<string, RoomWatch>,
  ) {}

  start(everyMs: number): void {
    this.loop ??= (async () => {
      while (!this.stopping) {
        for (const [room, watch] of this.watches) {
          if (!this.stopping) await this.sample(room, watch);
        }
        await sleep(everyMs);
      }
    })();
  }

  /** Waits for the sample under way (a read of a Redis that stopped answering: 10 s at most). */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.race([this.loop, sleep(10_000)]);
  }

  private async sample(room: string, watch: RoomWatch): Promise<void> {
    if (!watch.synced) return void this.tracks.delete(room);
    const { epoch, seq } = watch.roster;
    const members = membersOf(watch.roster);
    let roster: Roster;
    try {
      roster = await this.rc.roster(room);
    } catch (error) {
      this.readsFailed.add(codeOf(error));
      return;
    }
    const at = performance.now();
    const listed = membersOf(roster);
    this.counts.samples++;
    let since: number | null = null;
    const track = this.tracks.get(room);
    if (roster.epoch === epoch && roster.seq === seq) {
      if (listed !== members) since = at;
      this.tracks.delete(room);
    } else if (listed === members) {
      this.tracks.delete(room);
    } else if (track?.epoch === epoch && track.seq === seq && track.listed === listed) {
      if (at - track.since >= STUCK_MS) since = track.since;
    } else {
      this.tracks.set(room, { epoch, seq, listed, since: at });
    }
    if (since === null) return void this.streaks.delete(room);
    this.counts[this.phase]++;
    const streak = Math.min(since, this.streaks.get(room) ?? since);
    this.streaks.set(room, streak);
    this.counts.longestMs = Math.max(this.counts.longestMs, at - streak);
  }
}
