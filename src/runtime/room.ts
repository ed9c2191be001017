import type { Rollcall } from "../engine/rollcall.js";
import { ResyncPacer } from "../protocol/backoff.js";
import type { EventType } from "../protocol/events.js";
import { Pause } from "./background.js";
import { CountWatch } from "./counts.js";
import { RoomFeed, type Coalescing, type Sink } from "./feed.js";
import { SharedSnapshot } from "./snapshots.js";
import type { Subscriber, Subscription } from "./subscriber.js";

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

  constructor(
    readonly room: string,
    private readonly rollcall: Rollcall,
    subscriber: Subscriber,
    private readonly sink: Sink<F>,
    private readonly options: RoomOptions,
  ) {
    this.feed = new RoomFeed<F>(room, sink, options.coalescing);
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

  /** Nobody follows or watches the room any more. */
  get empty(): boolean {
    return this.feed.follows.size === 0 && this.counts.watchers.size === 0;
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

  /** Stops the room: timers, resyncs, and its subscription. Never rejects. */
  async close(): Promise<void> {
    this.isClosed = true;
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
        if (this.feed.follows.size === 0) {
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
