import { Sequencer } from "../protocol/chain.js";
import { carriesCount, type EventType, type PresenceEvent } from "../protocol/events.js";
import type { Snapshot } from "../protocol/replica.js";

/** What one follower receives of a room: the types it asked for, and where its chain stands. */
export interface Follow {
  readonly types: ReadonlySet<EventType> | null;
  /** The last event sent (or the snapshot's number), for a follower that filters types. */
  last: { epoch: string; seq: number } | null;
}

/**
 * Where a host's rooms send what their followers get: an adapter's sockets or documents. Each
 * call is for one follower; what is encoded is encoded once for all of them (Batch,
 * snapshotFrame).
 */
export interface Sink<F> {
  /** A follower's share of the room's events, in order: one chain. */
  events(to: F, batch: Batch): void;
  /** The room's roster: the answer to its join (with the join's `ref`), or a resync's. */
  snapshot(to: F, snapshot: Snapshot, ref: string | undefined): void;
  /** A watched room's member count (the answer to the watch, with its `ref`, then changes). */
  count?(to: F, room: string, count: number, ref: string | undefined): void;
  /**
   * Every event the room passes on, once for all its followers and after them, in order: what
   * an adapter reports of the room itself (also while it waits for a leave with no follower
   * left: LocalRoom.awaitLeave).
   */
  heard?(room: string, events: readonly PresenceEvent[]): void;
}

/**
 * When a room's events are coalesced: from `fromMembers` members on, the events of `intervalMs`
 * go out together (a version 2 socket gets them in one `events` frame), else each at once.
 */
export interface Coalescing {
  fromMembers: number;
  intervalMs: number;
}

/**
 * Events of a room on their way to its sockets, encoded once (to UTF-8 bytes) for every socket
 * that gets all of them: as one `event` frame each (version 1, or a single event), or one
 * `events` frame.
 */
export class Batch {
  private v1: readonly Buffer[] | undefined;
  private v2: readonly Buffer[] | undefined;

  constructor(
    readonly room: string,
    readonly events: readonly PresenceEvent[],
  ) {}

  /** The frames' text for a socket of protocol version 1 or 2. */
  frames(version: 1 | 2): readonly Buffer[] {
    if (version === 1 || this.events.length === 1) {
      return (this.v1 ??= this.events.map((event) => encode({ type: "event", event })));
    }
    return (this.v2 ??= [encode({ type: "events", room: this.room, events: this.events })]);
  }
}

const encode = (frame: object) => Buffer.from(JSON.stringify(frame));

/**
 * One room's events in this process, fanned out to the room's followers. The feed follows the
 * room's chain itself (the Sequencer's rules) and passes on only events that follow it: a gap,
 * another epoch or a message that conflicts with one already passed on (none of which a follower
 * could use) is held back, and `receive` asks for a resync instead, which the gateway does once
 * for the whole room (`install`) rather than each follower on its own. So a message on the room's
 * channel that does not fit reaches no browser, and costs at most one snapshot.
 *
 * A follower that asked for some types only still gets an unbroken chain of what it gets: the
 * next event sent to it has its `prev` set to the last event it got.
 *
 * A room of `fromMembers` members or more (as its last event or snapshot counted) is coalesced:
 * its events go out at most every `intervalMs`, together, the same text for every follower that
 * gets them all (an event after a quiet interval at once, those that follow it within the
 * interval with the next batch). A smaller room's go out at once.
 */
export class RoomFeed<S> {
  readonly follows = new Map<S, Follow>();
  private events = this.sequencer();
  private started = false;
  /** From the first snapshot until an event past it: where it stands, and what was heard of it. */
  private covering: { epoch: string; seq: number; heard: number } | null = null;
  /** The last event log entry id this feed knows it has everything up to (log on). */
  private logId: string | undefined;
  /** The room's members, as its last event or snapshot counted. */
  private members = 0;
  /** Events passed on since the last flush, in order. */
  private pending: PresenceEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** When the last batch went out (performance.now()). */
  private flushedAt = -Infinity;

  constructor(
    readonly room: string,
    private readonly sink: Sink<S>,
    private readonly coalescing: Coalescing,
    /** Told every event passed on, after the sink (see Sink.heard). */
    private readonly passed: (events: readonly PresenceEvent[]) => void = () => undefined,
  ) {}

  get log(): string | undefined {
    return this.logId;
  }

  /** Passes an event on when it follows; true when the room needs a resync. */
  receive(event: PresenceEvent): boolean {
    if (this.covering) this.hearCovered([event]);
    return this.events.receive(event);
  }

  /** Holds events from now on (the subscriber connection dropped). */
  hold(): void {
    this.events.hold();
  }

  /** A resync is about to read a snapshot: the events held so far are older. */
  requestSnapshot(): void {
    this.events.requestSnapshot();
  }

  /** Events read back from the log, before the held ones; true when a snapshot is still needed. */
  recover(events: readonly PresenceEvent[]): boolean {
    return this.events.recover(events);
  }

  /**
   * A snapshot of the room, read for a resync: every follower gets it, and the chain starts over
   * from it (even below a number some message claimed), then the held events that follow it
   * pass on. True when another resync is needed.
   */
  install(snapshot: Snapshot): boolean {
    this.flush();
    this.started = true;
    this.members = snapshot.count;
    this.logId = snapshot.log;
    for (const [to, follow] of this.follows) {
      this.sink.snapshot(to, snapshot, undefined);
      follow.last = { epoch: snapshot.epoch, seq: snapshot.seq };
    }
    return this.events.install(snapshot.epoch, snapshot.seq, snapshot.count);
  }

  /**
   * One follower's own snapshot (its join) was sent: its chain goes on from it, or from a later
   * event sent already. The feed's chain starts from the first one; after that a follower's
   * snapshot never moves it (it was read after the feed subscribed, so any event it is ahead of
   * is on its way to the feed, for the other followers). True when a resync is needed.
   */
  restart(to: S, snapshot: Snapshot): boolean {
    const { epoch, seq } = snapshot;
    const follow = this.follows.get(to);
    if (follow) {
      const { last } = follow;
      if (last === null || last.epoch !== epoch || last.seq < seq) follow.last = { epoch, seq };
    }
    if (this.started) return false;
    this.started = true;
    this.members = snapshot.count;
    this.logId = snapshot.log;
    // What happened since the room was subscribed, up to the snapshot (its first follower's own
    // join among it): no follower gets it, the snapshot has it, but the room heard it. What of
    // it is still on its way comes before any later event (see receive).
    this.covering = { epoch, seq, heard: 0 };
    this.hearCovered(this.events.pending, true);
    return this.events.install(epoch, seq, snapshot.count);
  }

  /** Sends the events passed on since the last flush: each follower its share, in one go. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const events = this.pending;
    if (events.length === 0) return;
    this.pending = [];
    const all = new Batch(this.room, events);
    for (const [to, follow] of this.follows) {
      const share = this.share(follow, events);
      if (share.length === 0) continue;
      this.sink.events(to, share === events ? all : new Batch(this.room, share));
    }
    this.heard(events);
    // From the end: a fan-out slower than the interval makes the next batch larger, not sooner.
    this.flushedAt = performance.now();
  }

  /**
   * No follower gets the room's events (it is only watched for its count) and the feed lost
   * track: it starts over from the next follower's snapshot, as a new feed would.
   */
  forget(): void {
    this.stop();
    this.events = this.sequencer();
    this.started = false;
    this.covering = null;
    this.logId = undefined;
  }

  /** Stops the flush timer (the room is closed). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = [];
  }

  /**
   * Events its first snapshot covers, received since the room was subscribed, are heard (once,
   * in order); one past it (or of another epoch) ends them. Held events of another epoch, before
   * the snapshot, are history.
   */
  private hearCovered(events: readonly PresenceEvent[], held = false): void {
    const covering = this.covering!;
    const covered: PresenceEvent[] = [];
    for (const event of events) {
      const same = event.epoch === covering.epoch;
      if (held && !same) continue;
      if (!same || event.seq > covering.seq) {
        this.covering = null;
        break;
      }
      if (event.seq <= covering.heard) continue;
      covering.heard = event.seq;
      covered.push(event);
    }
    if (covered.length > 0) this.heard(covered);
  }

  /** Events the room passed on, or its first snapshot covered: told once, in order. */
  private heard(events: readonly PresenceEvent[]): void {
    this.sink.heard?.(this.room, events);
    this.passed(events);
  }

  private sequencer(): Sequencer {
    return new Sequencer((event) => this.pass(event));
  }

  private pass(event: PresenceEvent): void {
    if (event.log !== undefined) this.logId = event.log;
    if (carriesCount(event)) this.members = event.count;
    this.pending.push(event);
    const { fromMembers, intervalMs } = this.coalescing;
    // A room that shrank below the mark sends what it kept back at once, with this event.
    if (this.members < fromMembers) return this.flush();
    if (this.timer !== undefined) return;
    // The first event after a quiet interval goes at once (with those that came in the same turn
    // of the event loop); those that follow wait their turn.
    const wait = Math.max(0, this.flushedAt + intervalMs - performance.now());
    this.timer = setTimeout(() => this.flush(), wait);
  }

  /** What a follower gets of some events (the same array when it gets them all, as they are). */
  private share(follow: Follow, events: readonly PresenceEvent[]): readonly PresenceEvent[] {
    let share: PresenceEvent[] | null = null;
    // Where the follower's chain stands, as the events go by (kept once, at the end).
    let epoch = follow.last?.epoch;
    let seq = follow.last?.seq ?? 0;
    let moved = false;
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      const same = epoch === event.epoch;
      const skip =
        (follow.types !== null && !follow.types.has(event.type)) ||
        // Its own snapshot, read after this event was published, has it already.
        (same && event.seq <= seq);
      const rewrite = !skip && follow.types !== null && same && event.prev > seq;
      if ((skip || rewrite) && share === null) share = events.slice(0, i);
      if (skip) continue;
      share?.push(rewrite ? { ...event, prev: seq } : event);
      epoch = event.epoch;
      seq = event.seq;
      moved = true;
    }
    if (moved) follow.last = { epoch: epoch!, seq };
    return share ?? events;
  }
}
