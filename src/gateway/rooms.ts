import type { Rollcall } from "../engine/rollcall.js";
import { ResyncPacer } from "../protocol/backoff.js";
import type { EventType } from "../protocol/events.js";
import { FrameError } from "../protocol/frames.js";
import { checkId, type IdPolicy } from "../protocol/ids.js";
import { encodeState } from "../protocol/state.js";
import type { MemberState } from "../protocol/state.js";
import { Pause } from "../runtime/background.js";
import type { Subscriber, Subscription } from "../runtime/subscriber.js";
import { roomAllowed, type Identity } from "./auth.js";
import { CountWatch } from "./counts.js";
import { RoomFeed, type Coalescing, type Sink } from "./feed.js";
import { HeartbeatBatch, HeartbeatWheel } from "../runtime/heartbeats.js";
import type { Beat, Session } from "./session.js";
import { SharedSnapshot, snapshotFrame } from "./snapshots.js";

export interface RoomsOptions {
  /** The `authorize` hook, called safely (a HookError when it fails). */
  authorize: ((identity: Identity, room: string) => Promise<boolean>) | undefined;
  /** The room's capacity (a HookError when a `capacity` hook fails). */
  capacity: (room: string) => number | undefined;
  ids: IdPolicy;
  maxRoomsPerSocket: number;
  heartbeatMs: number;
  coalescing: Coalescing;
  /** Count frames go out at most this often per room. */
  countIntervalMs: number;
  report: (error: unknown) => void;
}

interface Room {
  readonly feed: RoomFeed<Session>;
  readonly counts: CountWatch<Session>;
  readonly snapshots: SharedSnapshot;
  /** The count read of the room's first watchers, shared. */
  countRead: Promise<number> | null;
  readonly subscription: Promise<Subscription>;
  readonly pacer: ResyncPacer;
  readonly pause: Pause;
  /** A resync runs: it takes the one wanted meanwhile. */
  resyncing: boolean;
  wanted: "gap" | "reconnect" | null;
  closed: boolean;
}

/** Sends a room's frames to its sockets. */
const SINK: Sink<Session> = {
  events: (to, batch) => {
    for (const text of batch.frames(to.version)) to.sendText(text);
  },
  snapshot: (to, snapshot) => to.sendText(snapshotFrame(snapshot, undefined)),
};

/**
 * The rooms of a gateway's sockets: each one's subscription and feed while a socket is in it,
 * the snapshots sockets get, the heartbeats that keep every (socket, room) present, and the
 * resyncs of a feed that lost track (from the log when it is on, else one snapshot for every
 * socket of the room, spaced out with backoff when they keep coming).
 *
 * Heartbeats are paid per batch: every (socket, room) pair is refreshed once per interval, the
 * pairs of one bucket together (one heartbeatMany, at that bucket's slot of the interval), and
 * the beats sockets ask for (joins, heartbeat frames) within one turn of the event loop together.
 */
export class Rooms {
  private readonly rooms = new Map<string, Room>();
  private readonly wheel: HeartbeatWheel<Beat>;
  private readonly batch: HeartbeatBatch;

  constructor(
    private readonly rollcall: Rollcall,
    private readonly subscriber: Subscriber,
    private readonly options: RoomsOptions,
  ) {
    this.batch = new HeartbeatBatch(rollcall);
    this.wheel = new HeartbeatWheel(options.heartbeatMs, (beats) => {
      rollcall
        .heartbeatMany(beats.map(({ session, room }) => session.heartbeat(room)))
        .catch((error: unknown) => options.report(error));
    });
    this.wheel.start();
  }

  /** Whether an identity may be in a room: its token's rooms and the `authorize` hook agree. */
  async allowed(identity: Identity, room: string): Promise<boolean> {
    if (identity.rooms !== null && !roomAllowed(identity.rooms, room)) return false;
    if (this.options.authorize) return await this.options.authorize(identity, room);
    return identity.rooms !== null;
  }

  /** A socket joins a room, or rejoins it: heartbeat (join), then a snapshot for its replica. */
  async join(
    session: Session,
    room: string,
    state: MemberState | undefined,
    types: EventType[] | undefined,
    ref: string | undefined,
  ): Promise<void> {
    checkId("room", room, this.options.ids);
    const isNew = !session.rooms.has(room);
    const { maxRoomsPerSocket } = this.options;
    if (isNew && session.rooms.size >= maxRoomsPerSocket) {
      throw new FrameError("TOO_MANY_ROOMS", `at most ${maxRoomsPerSocket} rooms`, ref);
    }
    if (isNew && !(await this.allowed(session.identity, room))) {
      throw new FrameError("FORBIDDEN", `not allowed in room ${room}`, ref);
    }
    const entry = this.roomOf(room);
    entry.feed.deliveries.set(session, { types: types ? new Set(types) : null, last: null });
    try {
      await entry.subscription;
      const capacity = this.options.capacity(room);
      // Checked here, alone: in a batch, a bad entry would fail its neighbours too.
      if (state !== undefined) encodeState(state, this.rollcall.settings.maxStateBytes);
      const beat = await this.batch.add({
        ...session.heartbeat(room),
        ...(state === undefined ? {} : { state }),
        ...(capacity === undefined ? {} : { capacity }),
      });
      if (beat.full) throw new FrameError("ROOM_FULL", `room ${room} is full`, ref);
    } catch (error) {
      if (isNew) this.drop(session, room);
      throw error;
    }
    if (isNew) {
      const beat = { session, room };
      session.rooms.set(room, beat);
      this.wheel.add(beat, this.rollcall.bucketOf(room));
    }
    const snapshot = await entry.snapshots.next();
    session.sendText(snapshotFrame(snapshot, ref));
    if (this.rooms.get(room)?.feed.restart(session, snapshot)) this.resync(room, "gap");
  }

  /**
   * A socket watches a room's member count: it gets a count frame now (the answer), then one
   * when the count changes, at most every countIntervalMs. It is no member, and hears no event.
   */
  async watch(session: Session, room: string, ref: string | undefined): Promise<void> {
    checkId("room", room, this.options.ids);
    const { maxRoomsPerSocket } = this.options;
    if (session.watching.has(room)) {
      throw new FrameError("BAD_FRAME", `watching ${room} already`, ref);
    }
    if (session.watching.size >= maxRoomsPerSocket) {
      throw new FrameError("TOO_MANY_ROOMS", `at most ${maxRoomsPerSocket} watched rooms`, ref);
    }
    if (!(await this.allowed(session.identity, room))) {
      throw new FrameError("FORBIDDEN", `not allowed in room ${room}`, ref);
    }
    const entry = this.roomOf(room);
    entry.counts.add(session);
    session.watching.add(room);
    let count: number;
    try {
      await entry.subscription;
      count = entry.counts.count ?? (await (entry.countRead ??= this.readCount(room, entry)));
    } catch (error) {
      this.unwatch(session, room);
      throw error;
    }
    session.send({ type: "count", room, count, ...(ref === undefined ? {} : { ref }) });
    entry.counts.sent(session, count);
  }

  /** A socket stops watching a room's count. */
  unwatch(session: Session, room: string): void {
    session.watching.delete(room);
    const entry = this.rooms.get(room);
    entry?.counts.watchers.delete(session);
    if (entry) this.release(room, entry);
  }

  /** A socket leaves a room: it stops hearing it, and its connection is removed from it. */
  async leave(session: Session, room: string): Promise<void> {
    if (!this.drop(session, room)) return;
    await this.rollcall.leave(room, session.user, session.connection);
  }

  /** A socket's heartbeat frame: every room it is in, now (in the turn's batch). */
  async beat(session: Session): Promise<void> {
    await Promise.all(
      [...session.rooms.keys()].map((room) => this.batch.add(session.heartbeat(room))),
    );
  }

  /** Stops the heartbeats and every room's subscription (the sockets have left). */
  async close(): Promise<void> {
    this.wheel.stop();
    const rooms = [...this.rooms.values()];
    this.rooms.clear();
    for (const room of rooms) this.shut(room);
    await Promise.all(
      rooms.map((r) =>
        r.subscription.then(
          (s) => s.close(),
          () => undefined,
        ),
      ),
    );
  }

  private roomOf(room: string): Room {
    let entry = this.rooms.get(room);
    if (entry) return entry;
    const feed = new RoomFeed<Session>(room, SINK, this.options.coalescing);
    const counts = new CountWatch<Session>(
      (to, count) => to.send({ type: "count", room, count }),
      this.options.countIntervalMs,
    );
    const { metrics } = this.rollcall;
    const snapshots = new SharedSnapshot(
      () => this.rollcall.rosterPages(room),
      (pages) => metrics.add("rollcall.gateway.snapshot.reads", 1, { pages }),
    );
    const subscription = this.subscriber.subscribe(
      room,
      (event) => {
        counts.see(event);
        snapshots.see(event);
        if (feed.receive(event)) this.resync(room, "gap");
      },
      {
        onLost: () => feed.hold(),
        // Events were lost while the connection was down: the log has them, when it is on;
        // otherwise every socket here gets a new snapshot.
        onResubscribed: () => this.resync(room, "reconnect"),
      },
    );
    const created: Room = {
      feed,
      counts,
      snapshots,
      countRead: null,
      subscription,
      pacer: new ResyncPacer(),
      pause: new Pause(),
      resyncing: false,
      wanted: null,
      closed: false,
    };
    // A failed subscription fails the join that waits for it; the next join tries again.
    subscription.catch(() => {
      if (this.rooms.get(room) === created) this.rooms.delete(room);
      this.shut(created);
    });
    this.rooms.set(room, created);
    entry = created;
    return entry;
  }

  /**
   * Brings a room's feed back on track, once for all its sockets. Resyncs that keep coming (a
   * publisher that is not rollcall's) are spaced out with backoff; a failure is retried so.
   */
  private resync(room: string, reason: "gap" | "reconnect"): void {
    const entry = this.rooms.get(room);
    if (!entry || entry.closed) return;
    entry.feed.hold();
    entry.wanted = entry.wanted === "reconnect" ? "reconnect" : reason;
    if (entry.resyncing) return;
    entry.resyncing = true;
    void this.catchUp(room, entry).finally(() => (entry.resyncing = false));
  }

  private async catchUp(room: string, entry: Room): Promise<void> {
    while (entry.wanted !== null && !entry.closed) {
      const reason = entry.wanted;
      entry.wanted = null;
      const pause = entry.pacer.delay(performance.now());
      if (reason === "gap" && pause > 0) await entry.pause.wait(pause);
      if (entry.closed) return;
      try {
        // A room only watched needs its count again, not its members: one count read, started
        // now (a read under way began before what was missed), shared by watchers meanwhile.
        if (entry.feed.deliveries.size === 0) {
          entry.feed.forget();
          await (entry.countRead = this.readCount(room, entry));
          continue;
        }
        const after = entry.feed.log;
        if (this.rollcall.settings.logLength > 0 && after !== undefined) {
          const events = await this.rollcall.readLog(room, after);
          if (entry.closed) return;
          if (!entry.feed.recover(events)) continue;
        }
        entry.feed.requestSnapshot();
        const mark = entry.counts.mark;
        const snapshot = await entry.snapshots.next();
        // Watchers hear the count it shows, unless an event came meanwhile.
        entry.counts.read(snapshot.count, mark);
        // A newer resync is wanted (the connection came back meanwhile): this one may miss events.
        if (entry.wanted === null && !entry.closed && entry.feed.install(snapshot)) {
          entry.wanted = "gap";
        }
      } catch (error) {
        this.options.report(error);
        entry.wanted ??= reason;
        await entry.pause.wait(entry.pacer.delay(performance.now()));
      }
    }
  }

  /** Forgets a socket's room; the room's subscription goes with its last socket. */
  private drop(session: Session, room: string): boolean {
    const beat = session.rooms.get(room);
    if (beat) this.wheel.remove(beat);
    session.rooms.delete(room);
    const entry = this.rooms.get(room);
    entry?.feed.deliveries.delete(session);
    if (entry) this.release(room, entry);
    return beat !== undefined;
  }

  /** A room nobody is in or watches any more: its subscription goes. */
  private release(room: string, entry: Room): void {
    if (entry.feed.deliveries.size > 0 || entry.counts.watchers.size > 0) return;
    if (this.rooms.get(room) === entry) this.rooms.delete(room);
    this.shut(entry);
    entry.subscription.then((s) => s.close()).catch(() => undefined);
  }

  /** The count of a room nobody watched, read once for the watchers that come together. */
  private readCount(room: string, entry: Room): Promise<number> {
    const mark = entry.counts.mark;
    const read: Promise<number> = this.rollcall
      .count(room)
      .then(({ users }) => {
        entry.counts.read(users, mark);
        return entry.counts.count ?? users;
      })
      .finally(() => {
        if (entry.countRead === read) entry.countRead = null;
      });
    return read;
  }

  private shut(entry: Room): void {
    entry.closed = true;
    entry.pause.interrupt();
    entry.feed.stop();
    entry.counts.stop();
  }
}
