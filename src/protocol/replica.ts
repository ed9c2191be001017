import { Sequencer } from "./chain.js";
import { carriesCount, type EventType, type PresenceEvent } from "./events.js";
import { compareIds } from "./ids.js";
import type { MemberState } from "./state.js";

/**
 * A member as a replica knows it: what the events carry. Connections, lastSeen and a refreshed
 * typing mark change without an event, so a replica could follow them only by polling; it leaves
 * them out instead, and matches roster() exactly on everything it keeps.
 */
export interface ReplicaMember {
  readonly user: string;
  /** Redis time of the join, ms. */
  readonly joinedAt: number;
  readonly state: MemberState | null;
}

/** A roster snapshot: what roster() returns, or anything shaped like it. */
export interface Snapshot {
  readonly room: string;
  readonly epoch: string;
  readonly seq: number;
  readonly count: number;
  readonly members: readonly ReplicaMember[];
  readonly typing: readonly string[];
  /** With the event log on: the log's last entry id when the snapshot was taken. */
  readonly log?: string;
}

/** The replica's roster: members in roster() order (their ids' byte order), typists likewise. */
export interface ReplicaRoster extends Snapshot {
  /** Seq of the last event applied, or of the snapshot when none was applied since. */
  readonly seq: number;
}

/** One change of the replica, named like the event type that announces it. */
export interface RosterChange {
  readonly type: EventType;
  readonly user: string;
  /** The event that announced it, or null when a snapshot revealed it. */
  readonly event: PresenceEvent | null;
}

/** What an event or a snapshot did to the replica. */
export interface Outcome {
  readonly changes: readonly RosterChange[];
  /** Events were missed: take a snapshot and install it (events are held meanwhile). */
  readonly resync: boolean;
}

interface Members {
  readonly members: ReadonlyMap<string, ReplicaMember>;
  readonly typists: ReadonlySet<string>;
}

/**
 * The pure logic of a live roster: a snapshot, then the events that follow it in order (the rules
 * are the Sequencer's). An event that follows is applied; one applied already, or older than the
 * snapshot, is dropped; a gap, another epoch, or a number already passed that comes back with
 * other content (a message that was not rollcall's was applied) asks for a new snapshot to replace
 * the replica. While it is awaited, events are held and those that follow it are applied after
 * it. No I/O: the caller fetches snapshots and delivers events (RoomWatch over Redis, the browser
 * client over a WebSocket), and says when it asks for one (`requestSnapshot`).
 */
export class Replica {
  private members = new Map<string, ReplicaMember>();
  private typists = new Set<string>();
  private readonly events = new Sequencer((event) => this.changes.push(this.apply(event)));
  /** The changes of the call under way. */
  private changes: RosterChange[] = [];
  private count = 0;
  private logId: string | undefined;
  private view: ReplicaRoster | undefined;

  constructor(readonly room: string) {}

  get roster(): ReplicaRoster {
    this.view ??= this.render();
    return this.view;
  }

  /** A snapshot is awaited: events are held until it is installed. */
  get holding(): boolean {
    return this.events.holding;
  }

  /** Where the replica stands in the event log (when it is on): after this entry. */
  get log(): string | undefined {
    return this.logId;
  }

  /** Holds events from now on: they may be incomplete (a lost connection) until a snapshot. */
  hold(): void {
    this.events.hold();
  }

  /**
   * The caller is about to read a snapshot: the events held so far were published before it, so
   * one of them that does not fit it then is dropped, never a reason for another snapshot.
   */
  requestSnapshot(): void {
    this.events.requestSnapshot();
  }

  receive(event: PresenceEvent): Outcome {
    const resync = this.events.receive(event);
    return this.outcome([], resync);
  }

  /** Replaces the replica with a snapshot, then applies the held events that follow it. */
  install(snapshot: Snapshot): Outcome {
    const before: Members = { members: this.members, typists: this.typists };
    this.members = new Map(snapshot.members.map((m) => [m.user, member(m)]));
    this.typists = new Set(snapshot.typing);
    this.count = snapshot.count;
    this.logId = snapshot.log;
    this.view = undefined;
    const changes = changesBetween(before, { members: this.members, typists: this.typists });
    const resync = this.events.install(snapshot.epoch, snapshot.seq, snapshot.count);
    return this.outcome(changes, resync);
  }

  /**
   * Installs a roster read in pages (Rollcall.rosterPages), each consistent with its own seq: the
   * whole of it as of the last page's seq, brought there with the events held meanwhile (see
   * assemble). When they do not make one roster (a gap in the events, members that do not add
   * up to the count) nothing is installed: it stays holding, and asks for another read.
   */
  installPages(pages: readonly Snapshot[]): Outcome {
    if (pages.length === 1) return this.install(pages[0]!);
    const whole = assemble(pages, this.events.pending);
    return whole ? this.install(whole) : this.outcome([], true);
  }

  /**
   * Events read back from the log after a gap, in order: applied with the held ones. If they do
   * not close the gap (the log no longer held them all), a snapshot is still needed.
   */
  recover(events: readonly PresenceEvent[]): Outcome {
    return this.outcome([], this.events.recover(events));
  }

  private outcome(first: RosterChange[], resync: boolean): Outcome {
    const changes = this.changes;
    this.changes = [];
    if (changes.length === 0 && first.length === 0 && !resync) return NOTHING;
    return { changes: [...first, ...changes], resync };
  }

  private apply(event: PresenceEvent): RosterChange {
    const count = applyEvent({ members: this.members, typists: this.typists }, event);
    if (count !== undefined) this.count = count;
    if (event.log !== undefined) this.logId = event.log;
    this.view = undefined;
    return { type: event.type, user: event.user, event };
  }

  private render(): ReplicaRoster {
    const members = [...this.members.values()].sort((a, b) => compareIds(a.user, b.user));
    return Object.freeze({
      room: this.room,
      epoch: this.events.epoch,
      seq: this.events.seq,
      count: this.count,
      members: Object.freeze(members),
      typing: Object.freeze(members.filter((m) => this.typists.has(m.user)).map((m) => m.user)),
    });
  }
}

const NOTHING: Outcome = Object.freeze({ changes: Object.freeze([]), resync: false });

/** A replica's members and typists, as an event changes them. */
interface RosterState {
  members: Map<string, ReplicaMember>;
  typists: Set<string>;
}

/** What one event does to a roster; returns the room's count when the event says it. */
function applyEvent({ members, typists }: RosterState, event: PresenceEvent): number | undefined {
  const { user } = event;
  switch (event.type) {
    case "join":
      members.set(user, member({ user, joinedAt: event.at, state: event.state }));
      return event.count;
    case "leave":
      members.delete(user);
      typists.delete(user);
      return event.count;
    case "typing-start":
      typists.add(user);
      return undefined;
    case "typing-stop":
      typists.delete(user);
      return undefined;
    case "update": {
      const known = members.get(user);
      if (known) members.set(user, member({ ...known, state: event.state }));
      return undefined;
    }
  }
}

/**
 * A whole roster from its pages, each consistent with its own seq (the first page's is the
 * lowest), and the room's events seen meanwhile: each member as the last page that listed it
 * shows it, brought to the last page's seq with its events after that page's; a member no page
 * listed, with its events after the first page's. (A page lists every member present throughout
 * its read; one that came or went meanwhile is settled by its events.) Null when the events do
 * not hold every number in between, the pages span epochs, or the members so assembled are not
 * as many as the last page counts: read again.
 */
export function assemble(
  pages: readonly Snapshot[],
  events: readonly PresenceEvent[],
): Snapshot | null {
  const first = pages[0]!;
  const last = pages.at(-1)!;
  if (pages.some((p) => p.epoch !== first.epoch || p.seq < first.seq)) return null;
  const base = { room: first.room, epoch: last.epoch, seq: last.seq, count: last.count };
  if (last.count === 0) return { ...base, members: [], typing: [] };
  const between = new Map<number, PresenceEvent>();
  for (const e of events) {
    if (e.epoch === first.epoch && e.seq > first.seq && e.seq <= last.seq) between.set(e.seq, e);
  }
  const chain = [...between.values()].sort((a, b) => a.seq - b.seq);
  let prev = first.seq;
  let count = first.count;
  for (const e of chain) {
    if (e.prev !== prev && !(e.prev === 0 && count === 0)) return null;
    prev = e.seq;
    if (carriesCount(e)) count = e.count;
  }
  if (prev !== last.seq) return null;

  const listedAt = new Map<string, number>();
  const state: RosterState = { members: new Map(), typists: new Set() };
  for (const page of pages) {
    const typing = new Set(page.typing);
    for (const m of page.members) {
      listedAt.set(m.user, page.seq);
      state.members.set(m.user, member(m));
      if (typing.has(m.user)) state.typists.add(m.user);
      else state.typists.delete(m.user);
    }
  }
  for (const e of chain) if (e.seq > (listedAt.get(e.user) ?? first.seq)) applyEvent(state, e);
  // Pages that missed a member or listed one that had gone (a read that was not one pass over
  // the room) are no roster: the room's count says so.
  if (state.members.size !== last.count) return null;
  const members = [...state.members.values()].sort((a, b) => compareIds(a.user, b.user));
  const typing = members.filter((m) => state.typists.has(m.user)).map((m) => m.user);
  return { ...base, members, typing, ...(last.log === undefined ? {} : { log: last.log }) };
}

function member({ user, joinedAt, state }: ReplicaMember): ReplicaMember {
  return Object.freeze({ user, joinedAt, state });
}

/** What a snapshot changed, as the events that would have announced it. */
function changesBetween(before: Members, after: Members): RosterChange[] {
  const changes: RosterChange[] = [];
  const change = (type: EventType, user: string) => changes.push({ type, user, event: null });
  for (const [user, was] of before.members) {
    // Another joinedAt is another stay: the user left and came back while events were missed.
    if (after.members.get(user)?.joinedAt === was.joinedAt) continue;
    if (before.typists.has(user)) change("typing-stop", user);
    change("leave", user);
  }
  for (const [user, is] of after.members) {
    const was = before.members.get(user);
    const typing = after.typists.has(user);
    if (!was || was.joinedAt !== is.joinedAt) {
      change("join", user);
      if (typing) change("typing-start", user);
      continue;
    }
    if (JSON.stringify(was.state) !== JSON.stringify(is.state)) change("update", user);
    if (before.typists.has(user) !== typing) change(typing ? "typing-start" : "typing-stop", user);
  }
  return changes;
}
