import type { Rollcall } from "../engine/rollcall.js";
import type { LeaveResult } from "../engine/scripts/leave.js";
import { ResyncPacer } from "../protocol/backoff.js";
import type { EventType, PresenceEvent } from "../protocol/events.js";
import { Pause } from "./background.js";
import { CountWatch } from "./counts.js";
import { RoomFeed, type Coalescing, type Sink } from "./feed.js";
import { SharedSnapshot } from "./snapshots.js";
import type { Subscriber, Subscription } from "./subscriber.js";

/**
 * How long past the leave grace a room waits for a leave it awaits: a few sweeps (a Sweeper
 * passes every second by default, and Redis may be slow or away for a while) and the event's way
 * here. Past it, the leave is given up on (another connection of the user came back meanwhile,
 * or no sweeper ran).
 */
export const LEAVE_MARGIN_MS = 5_000;

/** A leave a room awaits (LocalRoom.awaitLeave). */
interface Waiting {
  readonly user: string;
  readonly end: () => void;
}

/** What a host's rooms need to know of it. */
export interface RoomOptions {
  coalescing: Coalescing;
  /** Count frames go out at most this often per room. */
  countIntervalMs: number;
  report(error: unknown): void;
}

/**
 * A room with followers in this process (sockets, documents): its subscription, the feed that
 * passes its events on in chain order, the count its watchers get, the snapshot reads its
 * followers share, and the resyncs of a feed that lost track: from the log when it is on, else
 * one snapshot for every follower, spaced out with backoff when they keep coming.
 */
export class LocalRoom<F> {
  readonly feed: RoomFeed<F>;
  readonly counts: CountWatch<F>;
  readonly snapshots: SharedSnapshot;
  /** Settles when the room's channel is subscribed; a failure closes the room. */
  readonly subscription: Promise<Subscription>;
  /** The count read of the room's first watchers, shared. */
  private countRead: Promise<number> | null = null;
  private readonly pacer = new ResyncPacer();
  private readonly pause = new Pause();
  /** A resync runs: it takes the one wanted meanwhile. */
  private resyncing = false;
  private wanted: "gap" | "reconnect" | null = null;
  private isClosed = false;
  /** The leaves awaited (awaitLeave): the room stays subscribed for them. */
  private readonly awaited = new Set<Waiting>();

  constructor(
    readonly room: string,
    private readonly rollcall: Rollcall,
    subscriber: Subscriber,
    private readonly sink: Sink<F>,
    private readonly options: RoomOptions,
  ) {
    this.feed = new RoomFeed<F>(room, sink, options.coalescing, (events) => this.heard(events));
    this.counts = new CountWatch<F>(
      (to, count) => sink.count?.(to, room, count, undefined),
      options.countIntervalMs,
    );
    const { metrics } = rollcall;
    this.snapshots = new SharedSnapshot(
      () => rollcall.rosterPages(room),
      (pages) => metrics.add("rollcall.gateway.snapshot.reads", 1, { pages }),
    );
    this.subscription = subscriber.subscribe(
      room,
      (event) => {
        this.counts.see(event);
        this.snapshots.see(event);
        if (this.feed.receive(event)) this.resync("gap");
      },
      {
        onLost: () => this.feed.hold(),
        // Events were lost while the connection was down: the log has them, when it is on;
        // otherwise every follower here gets a new snapshot.
        onResubscribed: () => this.resync("reconnect"),
      },
    );
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Nobody follows or watches the room any more, and no leave is awaited. */
  get empty(): boolean {
    return this.feed.follows.size === 0 && this.counts.watchers.size === 0 && !this.lingers;
  }

  /** The room waits for a leave (awaitLeave). */
  private get lingers(): boolean {
    return this.awaited.size > 0;
  }

  /**
   * The last connection here of `user` leaves the room (`leave`, the connection's leave call):
   * its leave is published by that call, or when the leave grace ends (by any instance's
   * Sweeper). The room stays subscribed, its feed going on with no follower left (Sink.heard
   * sees the events), until that leave was passed on, or the grace and LEAVE_MARGIN_MS passed,
   * or at once when the call says no leave is coming (the user is connected elsewhere) or fails
   * (rethrown): then `ended` is called, to release the room (Host.release closes it once
   * `empty`).
   */
  async awaitLeave(
    user: string,
    leave: () => Promise<LeaveResult | false>,
    ended: () => void,
  ): Promise<void> {
    const waiting = this.await(user, ended);
    try {
      const left = await leave();
      if (!left || !(left.left || left.leaving)) waiting.end();
    } catch (error) {
      waiting.end();
      throw error;
    }
  }

  /** Waits for a leave of `user` (see awaitLeave); `ended` is called once, when it ends. */
  private await(user: string, ended: () => void): Waiting {
    if (this.isClosed) {
      ended();
      return { user, end: () => undefined };
    }
    const timer = setTimeout(
      () => waiting.end(),
      this.rollcall.settings.leaveGraceMs + LEAVE_MARGIN_MS,
    );
    timer.unref();
    const waiting: Waiting = {
      user,
      end: () => {
        if (!this.awaited.delete(waiting)) return;
        clearTimeout(timer);
        ended();
      },
    };
    this.awaited.add(waiting);
    return waiting;
  }

  /** A follower gets the room's events (of some types) from its next snapshot on. */
  follow(follower: F, types: readonly EventType[] | undefined): void {
    this.feed.follows.set(follower, { types: types ? new Set(types) : null, last: null });
  }

  /**
   * Sends a follower the room's snapshot, read after this call (shared with the followers that
   * ask meanwhile), with `ref`; its chain goes on from it.
   */
  async greet(follower: F, ref: string | undefined): Promise<void> {
    const snapshot = await this.snapshots.next();
    if (!this.feed.follows.has(follower)) return;
    this.sink.snapshot(follower, snapshot, ref);
    if (this.feed.restart(follower, snapshot)) this.resync("gap");
  }

  /** The room's count, for a new watcher: known from events, else read (once for all). */
  count(): Promise<number> {
    const known = this.counts.count;
    if (known !== null) return Promise.resolve(known);
    return (this.countRead ??= this.readCount());
  }

  /** Stops the room: timers, resyncs, the leaves it awaits, and its subscription. Never rejects. */
  async close(): Promise<void> {
    this.isClosed = true;
    for (const waiting of [...this.awaited]) waiting.end();
    this.pause.interrupt();
    this.feed.stop();
    this.counts.stop();
    await this.subscription.then((s) => s.close()).catch(() => undefined);
  }

  /**
   * Brings the room's feed back on track, once for all its followers. Resyncs that keep coming
   * (a publisher that is not rollcall's) are spaced out with backoff; a failure is retried so.
   */
  resync(reason: "gap" | "reconnect"): void {
    if (this.isClosed) return;
    this.feed.hold();
    this.wanted = this.wanted === "reconnect" ? "reconnect" : reason;
    if (this.resyncing) return;
    this.resyncing = true;
    void this.catchUp().finally(() => (this.resyncing = false));
  }

  private async catchUp(): Promise<void> {
    while (this.wanted !== null && !this.isClosed) {
      const reason = this.wanted;
      this.wanted = null;
      const pause = this.pacer.delay(performance.now());
      if (reason === "gap" && pause > 0) await this.pause.wait(pause);
      if (this.isClosed) return;
      try {
        // A room only watched needs its count again, not its members: one count read, started
        // now (a read under way began before what was missed), shared by watchers meanwhile.
        // One that awaits a leave takes a snapshot, so that its feed goes on to that leave.
        if (this.feed.follows.size === 0 && !this.lingers) {
          this.feed.forget();
          await (this.countRead = this.readCount());
          continue;
        }
        const after = this.feed.log;
        if (this.rollcall.settings.logLength > 0 && after !== undefined) {
          const events = await this.rollcall.readLog(this.room, after);
          if (this.isClosed) return;
          if (!this.feed.recover(events)) continue;
        }
        this.feed.requestSnapshot();
        const mark = this.counts.mark;
        const snapshot = await this.snapshots.next();
        // Watchers hear the count it shows, unless an event came meanwhile.
        this.counts.read(snapshot.count, mark);
        // A newer resync is wanted (the connection came back meanwhile): this one may miss events.
        if (this.wanted === null && !this.isClosed && this.feed.install(snapshot)) {
          this.wanted = "gap";
        }
      } catch (error) {
        this.options.report(error);
        this.wanted ??= reason;
        await this.pause.wait(this.pacer.delay(performance.now()));
      }
    }
  }

  /** The events the feed passed on: the leaves awaited among them end their waits. */
  private heard(events: readonly PresenceEvent[]): void {
    if (!this.lingers) return;
    for (const event of events) {
      if (event.type !== "leave") continue;
      for (const waiting of [...this.awaited]) if (waiting.user === event.user) waiting.end();
    }
  }

  /** The count of a room nobody watched, read once for the watchers that come together. */
  private readCount(): Promise<number> {
    const mark = this.counts.mark;
    const read: Promise<number> = this.rollcall
      .count(this.room)
      .then(({ users }) => {
        this.counts.read(users, mark);
        return this.counts.count ?? users;
      })
      .finally(() => {
        if (this.countRead === read) this.countRead = null;
      });
    return read;
  }
}
