import { EventEmitter } from "node:events";
import type { EventType, PresenceEvent } from "./events.js";
import type { MemberState } from "./memberState.js";
import type { Roster } from "./rollcall.js";
import type { Subscriber, Subscription } from "./subscriber.js";

/**
 * A member as a replica knows it: what the events carry. Connections, lastSeen and the refreshed
 * typing mark change without any event, so a replica could follow them only by polling; it leaves
 * them out instead, and matches roster() exactly on everything it keeps.
 */
export interface WatchedMember {
  readonly user: string;
  /** Redis time of the join, ms. */
  readonly joinedAt: number;
  readonly state: MemberState | null;
}

/** The replica's roster, shaped like roster()'s: members and typists in the same order. */
export interface WatchedRoster {
  readonly room: string;
  /** Seq of the last event applied, or of the snapshot when none was applied since. */
  readonly seq: number;
  /** Members in the room, as the last snapshot or join/leave event counted them. */
  readonly count: number;
  readonly members: readonly WatchedMember[];
  readonly typing: readonly string[];
}

/** One change of the replica, named like the event type that announces it. */
export interface RosterChange {
  readonly type: EventType;
  readonly user: string;
  /** The event that announced it, or null when a resync found it in a fresh snapshot. */
  readonly event: PresenceEvent | null;
}

/**
 * Why a snapshot was taken. start: the first one; gap: an event did not follow the last one
 * applied; reconnect: the subscriber connection came back, so events may have been lost.
 */
export type SyncReason = "start" | "gap" | "reconnect";

interface RoomWatchEvents {
  /** The replica changed; read `roster` for the whole of it. */
  change: [change: RosterChange];
  /** The replica was replaced by a snapshot (after the changes that tells apart were reported). */
  sync: [reason: SyncReason];
}

interface Replica {
  readonly members: ReadonlyMap<string, WatchedMember>;
  readonly typists: ReadonlySet<string>;
}

const FIRST_RETRY_MS = 100;
const LAST_RETRY_MS = 5_000;

/**
 * A live replica of one room's roster, for an instance with clients in the room: subscribed
 * first, then a snapshot, then every later event in order. An event that does not follow the last
 * one applied, or a lost subscriber connection, means something was missed: it takes a new
 * snapshot and reports the difference as changes. Created by `Subscriber.watch()`.
 *
 * Exact for rooms of up to `rosterLimit` members: a snapshot lists no more than that.
 */
export class RoomWatch extends EventEmitter<RoomWatchEvents> {
  private members = new Map<string, WatchedMember>();
  private typists = new Set<string>();
  private seq = 0;
  private count = 0;
  /** Events held back while a snapshot is wanted or on its way; null while applying directly. */
  private held: PresenceEvent[] | null = [];
  /** Why the next snapshot is wanted, or null when none is. */
  private wanted: SyncReason | null = "start";
  /** A sync loop runs (or open() is under way): it will take any snapshot wanted meanwhile. */
  private syncing = false;
  private started = false;
  /** The subscriber connection is down: events are being missed until it is back. */
  private lost = false;
  private isSynced = false;
  private isClosed = false;
  private view: WatchedRoster | undefined;
  private subscription: Subscription | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly subscriber: Subscriber,
    readonly room: string,
  ) {
    super();
  }

  /** The replica as of the last event applied; members in roster() order. */
  get roster(): WatchedRoster {
    this.view ??= this.render();
    return this.view;
  }

  /** Every event since the last snapshot applied: no gap seen, no snapshot due, connection up. */
  get synced(): boolean {
    return this.isSynced;
  }

  /** Subscribes, then takes the first snapshot; on failure it closes and rejects. */
  async open(): Promise<void> {
    this.syncing = true;
    try {
      this.subscription = await this.subscriber.subscribe(this.room, (e) => this.receive(e), {
        onLost: () => this.lose(),
        onResubscribed: () => this.resync("reconnect"),
      });
      await this.sync();
    } catch (error) {
      await this.close();
      throw error;
    } finally {
      this.syncing = false;
    }
  }

  /** Stops following the room; its channel is unsubscribed once no one else listens to it. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.isSynced = false;
    this.wake?.();
    await this.subscription?.close();
  }

  private receive(event: PresenceEvent): void {
    if (this.isClosed) return;
    if (this.held) {
      this.held.push(event);
      return;
    }
    if (event.seq <= this.seq) return; // the snapshot, or an event applied before, covers it
    const follows = event.prev === this.seq || (event.prev === 0 && this.count === 0);
    if (follows) this.apply(event);
    else this.resync("gap");
  }

  private apply(event: PresenceEvent): void {
    const { user } = event;
    switch (event.type) {
      case "join":
        this.members.set(user, member(user, event.at, event.state));
        this.count = event.count;
        break;
      case "leave":
        this.members.delete(user);
        this.typists.delete(user);
        this.count = event.count;
        break;
      case "typing-start":
        this.typists.add(user);
        break;
      case "typing-stop":
        this.typists.delete(user);
        break;
      case "update": {
        const known = this.members.get(user);
        if (known) this.members.set(user, member(user, known.joinedAt, event.state));
        break;
      }
    }
    this.seq = event.seq;
    this.view = undefined;
    this.tell(() => this.emit("change", { type: event.type, user, event }));
  }

  private lose(): void {
    this.isSynced = false;
    if (this.subscriber.closed) {
      void this.close();
      return;
    }
    this.lost = true;
    this.held ??= [];
  }

  private resync(reason: SyncReason): void {
    if (reason === "reconnect") this.lost = false;
    this.isSynced = false;
    this.held ??= [];
    this.wanted = reason;
    if (this.syncing) return;
    this.syncing = true;
    void this.sync()
      .catch((error: unknown) => this.subscriber.report(error))
      .finally(() => (this.syncing = false));
  }

  /**
   * Takes snapshots until one is installed with no newer one wanted. Before the first, a failure
   * rejects (open() fails); after it, failures are reported and retried with backoff.
   */
  private async sync(): Promise<void> {
    let failures = 0;
    while (this.wanted !== null && !this.isClosed) {
      const reason = this.wanted;
      this.wanted = null;
      let snapshot: Roster;
      try {
        snapshot = await this.subscriber.rollcall.roster(this.room);
      } catch (error) {
        if (!this.started) throw error;
        this.subscriber.report(error);
        this.wanted ??= reason;
        failures += 1;
        await this.pause(Math.min(FIRST_RETRY_MS * 2 ** (failures - 1), LAST_RETRY_MS));
        continue;
      }
      failures = 0;
      // A newer snapshot is wanted (the connection came back meanwhile): this one may miss events.
      if (this.wanted === null && !this.isClosed) this.install(snapshot, reason);
    }
  }

  private install(snapshot: Roster, reason: SyncReason): void {
    const before: Replica = { members: this.members, typists: this.typists };
    this.members = new Map(
      snapshot.members.map((m) => [m.user, member(m.user, m.joinedAt, m.state)]),
    );
    this.typists = new Set(snapshot.typing);
    this.seq = snapshot.seq;
    this.count = snapshot.count;
    this.view = undefined;
    this.started = true;
    // Taken while the connection is down, it is the best view there is, but not a synced one.
    this.isSynced = !this.lost;
    const held = this.held ?? [];
    this.held = this.lost ? [] : null;
    const after: Replica = { members: this.members, typists: this.typists };
    for (const change of differences(before, after)) this.tell(() => this.emit("change", change));
    this.tell(() => this.emit("sync", reason));
    for (const event of held) this.receive(event);
  }

  private render(): WatchedRoster {
    const members = [...this.members.values()].sort((a, b) => byBytes(a.user, b.user));
    return Object.freeze({
      room: this.room,
      seq: this.seq,
      count: this.count,
      members: Object.freeze(members),
      typing: Object.freeze(members.filter((m) => this.typists.has(m.user)).map((m) => m.user)),
    });
  }

  /** Calls the caller's listeners; one that throws is reported, never propagated. */
  private tell(emit: () => void): void {
    try {
      emit();
    } catch (error) {
      this.subscriber.report(error);
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

function member(user: string, joinedAt: number, state: MemberState | null): WatchedMember {
  return Object.freeze({ user, joinedAt, state });
}

/** roster() lists members in the byte order of their UTF-8 ids (Redis's lexical order). */
function byBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** What a snapshot changed, as the events that would have announced it. */
function differences(before: Replica, after: Replica): RosterChange[] {
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
