import type { Rollcall } from "../engine/rollcall.js";
import { RollcallError } from "../protocol/errors.js";
import type { EventType } from "../protocol/events.js";
import { FrameError, type FrameErrorCode } from "../protocol/frames.js";
import { integer, knownKeys } from "../protocol/options.js";
import { Connection, type Beat, type ConnectionHost } from "./connection.js";
import type { Sink } from "./feed.js";
import { failures, HeartbeatWheel, heartbeatInterval, TurnBatch } from "./heartbeats.js";
import { HookError } from "./hooks.js";
import { LocalRoom } from "./room.js";
import { Subscriber } from "./subscriber.js";
import { ownSweeper, type Sweeper, type SweeperOptions } from "./sweeper.js";

export interface HostOptions {
  /** The process's Subscriber; by default the host makes its own (one Redis connection). */
  subscriber?: Subscriber;
  /** Runs a Sweeper while open (true, or its options); false if the process runs its own. */
  sweeper?: boolean | SweeperOptions;
  /** How often every (connection, room) is heartbeated. Default a third of the presence window. */
  heartbeatMs?: number;
  /** Large rooms' events are coalesced (see RoomFeed). Defaults 100 members and 50 ms. */
  coalesce?: { fromMembers?: number; intervalMs?: number };
  /** A watched room's count goes out at most this often. Default 1 000. */
  countIntervalMs?: number;
}

/** The host option names, for adapters that take them among their own. */
export const HOST_OPTIONS = [
  "subscriber",
  "sweeper",
  "heartbeatMs",
  "coalesce",
  "countIntervalMs",
] as const satisfies readonly (keyof HostOptions)[];

/** An error as a client is told it: a stable code and a message. */
export interface Refusal {
  readonly code: FrameErrorCode;
  readonly message: string;
}

/**
 * What every server integration needs between its sockets and the engine, built once: each
 * socket's rollcall connection (its rooms heartbeated in batches from one wheel, its calls in
 * order), the local fan-out of the rooms it follows (one subscription per room, the feed that
 * passes events on in chain order and coalesces large rooms, snapshot reads shared by the
 * followers that ask together, resyncs once per room), count watches, the process's Subscriber
 * and Sweeper, and what a failure is called on the wire. An adapter maps its framework's events
 * onto it: a socket connects, joins, types, leaves, closes; what its rooms say reaches the
 * adapter's `Sink`.
 */
export class Host<F> implements ConnectionHost<F> {
  readonly heartbeatMs: number;
  readonly subscriber: Subscriber;
  readonly batch: TurnBatch;
  readonly wheel: HeartbeatWheel<Beat>;
  private readonly rooms = new Map<string, LocalRoom<F>>();
  private readonly ownsSubscriber: boolean;
  private readonly sweeper: Sweeper | undefined;
  private readonly roomOptions: ConstructorParameters<typeof LocalRoom<F>>[4];
  private isClosed = false;

  constructor(
    readonly rollcall: Rollcall,
    readonly sink: Sink<F>,
    /** Where failures go (the adapter's `error` event): never thrown. */
    readonly report: (error: unknown) => void,
    options: HostOptions = {},
  ) {
    const o = knownKeys(options, HOST_OPTIONS);
    this.heartbeatMs = heartbeatInterval(rollcall, o.heartbeatMs);
    const coalesce = knownKeys(o.coalesce, ["fromMembers", "intervalMs"]);
    this.roomOptions = {
      coalescing: {
        fromMembers: integer("coalesce.fromMembers", coalesce.fromMembers ?? 100, 1, 1_000_000_000),
        intervalMs: integer("coalesce.intervalMs", coalesce.intervalMs ?? 50, 1, 10_000),
      },
      countIntervalMs: integer("countIntervalMs", o.countIntervalMs ?? 1_000, 1, 3_600_000),
      report,
    };
    this.ownsSubscriber = o.subscriber === undefined;
    this.subscriber = o.subscriber ?? new Subscriber(rollcall);
    if (this.ownsSubscriber) this.subscriber.on("error", report);
    this.batch = new TurnBatch(rollcall);
    // A round whose call for a bucket failed reports it; the next round (or a retry of its
    // entries) sends it again.
    this.wheel = new HeartbeatWheel(this.heartbeatMs, (beats) => {
      rollcall
        .heartbeatMany(beats.map((b) => b.connection.heartbeat(b.room, b.invisible)))
        .then((outcomes) => failures(outcomes).forEach(report), report);
    });
    this.wheel.start();
    this.sweeper = ownSweeper(rollcall, o.sweeper, report);
  }

  /** A socket's connection of `user`; its rooms' events go to `follower`, if given. */
  connect(user: string, follower?: F, id?: string): Connection<F> {
    return new Connection<F>(this, user, follower, id);
  }

  /**
   * A follower gets a room's events without being in it (an observer, a document): the room is
   * subscribed, its snapshot read (shared) and sent, then its events. Following again sends a
   * new snapshot (what a client that lost track asks for).
   */
  async follow(
    room: string,
    follower: F,
    options: { types?: readonly EventType[]; ref?: string } = {},
  ): Promise<void> {
    const local = this.room(room);
    local.follow(follower, options.types);
    try {
      await local.subscription;
      await local.greet(follower, options.ref);
    } catch (error) {
      this.release(room, follower);
      throw error;
    }
  }

  unfollow(room: string, follower: F): void {
    this.release(room, follower);
  }

  /**
   * A follower watches a room's member count without being in it: the sink's `count` gets it now
   * (with `ref`), then when it changes, at most every `countIntervalMs`.
   */
  async watch(room: string, follower: F, ref?: string): Promise<void> {
    const local = this.room(room);
    local.counts.add(follower);
    let count: number;
    try {
      await local.subscription;
      count = await local.count();
    } catch (error) {
      this.unwatch(room, follower);
      throw error;
    }
    if (!local.counts.watchers.has(follower)) return;
    this.sink.count?.(follower, room, count, ref);
    local.counts.sent(follower, count);
  }

  unwatch(room: string, follower: F): void {
    const local = this.rooms.get(room);
    local?.counts.watchers.delete(follower);
    if (local?.empty) this.shut(local);
  }

  /**
   * What a failed call is called on the wire: bad input keeps its code, an outage or a hook that
   * took too long is UNAVAILABLE, anything else INTERNAL (reported: the server's bug or outage,
   * not the client's).
   */
  refusal(error: unknown): Refusal {
    if (error instanceof FrameError) return { code: error.code, message: error.message };
    if (error instanceof RollcallError) {
      const code = wireCode(error);
      if (code === "INTERNAL" || code === "UNAVAILABLE") this.report(error);
      return { code, message: error.message };
    }
    this.report(error);
    if (error instanceof HookError && error.failure === "timeout") {
      return { code: "UNAVAILABLE", message: "the server could not decide in time" };
    }
    return { code: "INTERNAL", message: "the server failed to handle the request" };
  }

  /** Stops heartbeating and every room (connections should be closed first), then what it owns. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.wheel.stop();
    const rooms = [...this.rooms.values()];
    this.rooms.clear();
    await Promise.all(rooms.map((local) => local.close()));
    if (this.ownsSubscriber) this.subscriber.close();
    await this.sweeper?.stop();
  }

  room(room: string): LocalRoom<F> {
    let local = this.rooms.get(room);
    if (local) return local;
    const created = new LocalRoom<F>(
      room,
      this.rollcall,
      this.subscriber,
      this.sink,
      this.roomOptions,
    );
    // A failed subscription fails the calls that wait for it; the next one tries again.
    created.subscription.catch(() => this.shut(created));
    this.rooms.set(room, created);
    local = created;
    return local;
  }

  release(room: string, follower: F): void {
    const local = this.rooms.get(room);
    local?.feed.follows.delete(follower);
    if (local?.empty) this.shut(local);
  }

  private shut(local: LocalRoom<F>): void {
    if (this.rooms.get(local.room) === local) this.rooms.delete(local.room);
    void local.close();
  }
}

/** The wire code of an engine error. */
function wireCode(error: RollcallError): FrameErrorCode {
  switch (error.code) {
    case "INVALID_ID":
    case "INVALID_STATE":
    case "INVALID_OPTION":
      return error.code;
    // Redis is full: like an outage to a client, a call that may succeed later.
    case "REDIS_UNAVAILABLE":
    case "REDIS_OOM":
      return "UNAVAILABLE";
    default:
      return "INTERNAL";
  }
}
