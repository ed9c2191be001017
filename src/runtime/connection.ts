import { randomUUID } from "node:crypto";
import type { Heartbeat, Rollcall } from "../engine/rollcall.js";
import type { HeartbeatResult } from "../engine/scripts/heartbeat.js";
import type { LeaveResult } from "../engine/scripts/leave.js";
import type { StateResult } from "../engine/scripts/setState.js";
import type { TypingResult } from "../engine/scripts/startTyping.js";
import type { StopTypingResult } from "../engine/scripts/stopTyping.js";
import type { EventType } from "../protocol/events.js";
import { FrameError } from "../protocol/frames.js";
import { encodeState, type MemberState } from "../protocol/state.js";
import type { Sink } from "./feed.js";
import type { HeartbeatWheel, TurnBatch } from "./heartbeats.js";
import type { LocalRoom } from "./room.js";

/** One (connection, room) pair, as the heartbeat wheel holds it. */
export interface Beat {
  readonly connection: { heartbeat(room: string, invisible: boolean): Heartbeat };
  readonly room: string;
  /** The connection is in the room unseen (see JoinOptions.invisible). */
  readonly invisible: boolean;
}

/** What a connection needs of its host. */
export interface ConnectionHost<F> {
  readonly rollcall: Rollcall;
  readonly sink: Sink<F>;
  readonly batch: TurnBatch;
  readonly wheel: HeartbeatWheel<Beat>;
  /** The room's local fan-out, made with its first follower. */
  room(room: string): LocalRoom<F>;
  /** A follower gets a room's events, from a snapshot sent now (see Host.follow). */
  follow(room: string, follower: F): Promise<void>;
  /** A follower no longer follows a room: the room closes with its last one. */
  release(room: string, follower: F): void;
  report(error: unknown): void;
}

export interface JoinOptions {
  /** The member's state (checked alone: in the turn's batch, a bad one would fail others). */
  state?: MemberState;
  /** The most members the room may hold: past it the result is `full` and nothing changes. */
  capacity?: number;
  /** The event types the connection's follower gets of the room. Default: every type. */
  types?: readonly EventType[];
  /** Passed to the sink with the join's snapshot. */
  ref?: string;
  /**
   * The connection stays in the room when the join fails (an outage): the heartbeat rounds join
   * it once Redis is back. Default false: a join that fails leaves nothing behind.
   */
  retry?: boolean;
  /** Checks a join of a room the connection is not in yet, in its turn: throw to refuse it. */
  admit?: () => Promise<void> | void;
  /**
   * The connection is in the room unseen: in no roster, count, event or status (the engine's
   * `invisible`), and its typing and state are refused (FORBIDDEN). A join of a room it is in
   * with the other visibility switches it: it leaves, then joins anew. Default false.
   */
  invisible?: boolean;
}

/** A connection's calls, carried out now: what a task given to `inTurn` calls. */
export interface Turn {
  /**
   * Joins a room, or heartbeats it again (with a new state) when in it already; resolves when
   * the heartbeat is applied and, with a follower, its snapshot was sent. A closed connection
   * joins nothing (`joined` and `full` false).
   */
  join(room: string, options?: JoinOptions): Promise<HeartbeatResult>;
  /** Leaves a room: it stops hearing it, and its connection is removed. False if not in it. */
  leave(room: string): Promise<LeaveResult | false>;
  setState(room: string, state: MemberState): Promise<StateResult>;
  startTyping(room: string): Promise<TypingResult>;
  stopTyping(room: string): Promise<StopTypingResult>;
  /** Every room it is in, heartbeated now (in the turn's batch). */
  beat(): Promise<void>;
}

/**
 * One socket's rollcall connection: the rooms it is in, heartbeated by its host's wheel, and
 * what it asks of them, carried out in order, each call after the last settled, so that a leave
 * never reaches Redis before the join it follows (nor a state before its join). With a follower,
 * a join also subscribes the room, and sends the follower the room's snapshot after the join,
 * then its events.
 */
export class Connection<F> implements Turn {
  /** The rooms it is in (made at the first join: an idle socket should cost little). */
  private joined: Map<string, Beat> | undefined;
  /** The calls under way, in order (none: an idle connection keeps no promise). */
  private queue: Promise<unknown> | undefined;
  private now: Now<F> | undefined;
  private isClosed = false;

  constructor(
    private readonly host: ConnectionHost<F>,
    readonly user: string,
    /** What gets the events of its rooms (a socket), or none (they go elsewhere). */
    private to: F | undefined,
    readonly id: string = randomUUID(),
  ) {}

  get follower(): F | undefined {
    return this.to;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** The rooms it is in. */
  rooms(): string[] {
    return [...(this.joined?.keys() ?? [])];
  }

  has(room: string): boolean {
    return this.joined?.has(room) ?? false;
  }

  get size(): number {
    return this.joined?.size ?? 0;
  }

  /** Whether it is in a room unseen. */
  invisibleIn(room: string): boolean {
    return this.joined?.get(room)?.invisible ?? false;
  }

  /** The engine's heartbeat of this connection in a room. */
  heartbeat(room: string, invisible = this.invisibleIn(room)): Heartbeat {
    const beat = { room, user: this.user, connection: this.id };
    return invisible ? { ...beat, invisible } : beat;
  }

  join(room: string, options?: JoinOptions): Promise<HeartbeatResult> {
    return this.inTurn((turn) => turn.join(room, options));
  }

  leave(room: string): Promise<LeaveResult | false> {
    return this.inTurn((turn) => turn.leave(room));
  }

  setState(room: string, state: MemberState): Promise<StateResult> {
    return this.inTurn((turn) => turn.setState(room, state));
  }

  startTyping(room: string): Promise<TypingResult> {
    return this.inTurn((turn) => turn.startTyping(room));
  }

  stopTyping(room: string): Promise<StopTypingResult> {
    return this.inTurn((turn) => turn.stopTyping(room));
  }

  beat(): Promise<void> {
    return this.inTurn((turn) => turn.beat());
  }

  /**
   * Its rooms' events go to another follower from now on (a socket that took over the
   * connection, as Socket.IO recovers a session), each room's snapshot first.
   */
  rebind(follower: F): Promise<void> {
    return this.inTurn(async () => {
      const before = this.to;
      this.to = follower;
      await Promise.all(
        this.rooms().map((room) => {
          if (before !== undefined) this.host.release(room, before);
          return this.host.follow(room, follower);
        }),
      );
    });
  }

  /**
   * Runs a task in the connection's order, after every one asked for before it has settled: an
   * adapter's request that makes several calls (a token refresh, a join it checks first) makes
   * them through the `Turn` it is given, and its replies go out in the order of the requests.
   */
  inTurn<T>(task: (turn: Turn) => Promise<T>): Promise<T> {
    const turn = (this.now ??= new Now(this, this.host));
    // Nothing under way (the usual case for a frame): the task starts now.
    const run = this.queue ? this.queue.then(() => task(turn)) : startNow(task, turn);
    const settled = (): void => {
      if (this.queue === tail) this.queue = undefined;
    };
    const tail: Promise<void> = run.then(settled, settled);
    this.queue = tail;
    return run;
  }

  /**
   * The socket is gone: after the calls under way, every room is left (like a handler's
   * `finally` block). A leave that fails is reported: the window expires it.
   */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    await this.inTurn((turn) =>
      Promise.all(
        this.rooms().map((room) =>
          turn.leave(room).catch((error: unknown) => this.host.report(error)),
        ),
      ),
    );
  }

  /**
   * Stops heartbeating its rooms and following them, without leaving: its presence is handed
   * over (to a connection of the same id) or left to expire.
   */
  abandon(): void {
    this.isClosed = true;
    for (const room of this.rooms()) this.drop(room);
  }

  /** @internal A room joined (or its visibility switched): heartbeated from now on. */
  enter(room: string, invisible: boolean): void {
    this.hold(room);
    const beat: Beat = { connection: this, room, invisible };
    (this.joined ??= new Map()).set(room, beat);
    this.host.wheel.add(beat, this.host.rollcall.bucketOf(room));
  }

  /** @internal No more heartbeats of a room until it is entered again. */
  hold(room: string): void {
    const beat = this.joined?.get(room);
    if (beat) this.host.wheel.remove(beat);
  }

  /** @internal Forgets a room: no more heartbeats, no more events. True if it was in it. */
  drop(room: string): boolean {
    const beat = this.joined?.get(room);
    if (beat) this.host.wheel.remove(beat);
    this.joined?.delete(room);
    if (this.to !== undefined) this.host.release(room, this.to);
    return beat !== undefined;
  }
}

/** A task started at once, a throw of it as a rejection (as when it runs after another). */
function startNow<T>(task: (turn: Turn) => Promise<T>, turn: Turn): Promise<T> {
  try {
    return Promise.resolve(task(turn));
  } catch (error) {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what it threw, as is
    return Promise.reject(error);
  }
}

/** A connection's calls, carried out at once (its turn has come). */
class Now<F> implements Turn {
  constructor(
    private readonly connection: Connection<F>,
    private readonly host: ConnectionHost<F>,
  ) {}

  async join(room: string, options: JoinOptions = {}): Promise<HeartbeatResult> {
    const { state, capacity, types, ref, admit, retry = false, invisible = false } = options;
    const { connection, host } = this;
    // A join that comes after the close (it waited for something) joins nothing.
    if (connection.closed) return { joined: false, full: false, event: null };
    const isNew = !connection.has(room);
    const switching = !isNew && connection.invisibleIn(room) !== invisible;
    if (isNew && admit) await admit();
    const follower = connection.follower;
    const local = follower === undefined ? undefined : host.room(room);
    local?.follow(follower!, types);
    if (isNew && retry) connection.enter(room, invisible);
    let result: HeartbeatResult;
    try {
      await local?.subscription;
      if (state !== undefined) encodeState(state, host.rollcall.settings.maxStateBytes);
      if (switching) await this.switchVisibility(room, invisible);
      result = await host.batch.add({
        ...connection.heartbeat(room, invisible),
        ...(state === undefined ? {} : { state }),
        ...(capacity === undefined ? {} : { capacity }),
      });
    } catch (error) {
      if (isNew && !retry) connection.drop(room);
      throw error;
    }
    if (result.full) {
      // Switched, it had left: a round's heartbeat (no capacity) must not join it after all.
      if (isNew || switching) connection.drop(room);
      return result;
    }
    if (isNew && !retry) connection.enter(room, invisible);
    await local?.greet(follower!, ref);
    return result;
  }

  /**
   * The engine keeps a connection's visibility in a room until it leaves: a switch leaves first
   * (seen as a leave when it was visible), unheartbeated meanwhile, as a round landing after the
   * leave would put it back as it was. Its join comes next.
   */
  private async switchVisibility(room: string, invisible: boolean): Promise<void> {
    const { connection, host } = this;
    connection.hold(room);
    let left = false;
    try {
      await host.rollcall.leave(room, connection.user, connection.id);
      left = true;
    } finally {
      connection.enter(room, left ? invisible : !invisible);
    }
  }

  async leave(room: string): Promise<LeaveResult | false> {
    const { connection } = this;
    if (!connection.drop(room)) return false;
    return await this.host.rollcall.leave(room, connection.user, connection.id);
  }

  setState(room: string, state: MemberState): Promise<StateResult> {
    return this.host.rollcall.setState(this.seenIn(room), this.connection.user, state);
  }

  startTyping(room: string): Promise<TypingResult> {
    return this.host.rollcall.startTyping(this.seenIn(room), this.connection.user);
  }

  stopTyping(room: string): Promise<StopTypingResult> {
    return this.host.rollcall.stopTyping(this.seenIn(room), this.connection.user);
  }

  async beat(): Promise<void> {
    const { connection, host } = this;
    await Promise.all(connection.rooms().map((room) => host.batch.add(connection.heartbeat(room))));
  }

  /**
   * A room the connection is in, visibly: typing and state are the user's in the room (not the
   * connection's), and would show an invisible one to everyone.
   */
  private seenIn(room: string): string {
    const shown = room.slice(0, 256);
    if (!this.connection.has(room)) throw new FrameError("NOT_JOINED", `not in room ${shown}`);
    if (this.connection.invisibleIn(room)) {
      throw new FrameError(
        "FORBIDDEN",
        `invisible in room ${shown}: invisible members do not type or set a state`,
      );
    }
    return room;
  }
}
