import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type { Namespace, Socket } from "socket.io";
import type { Heartbeat, Rollcall } from "../engine/rollcall.js";
import type { HeartbeatResult } from "../engine/scripts/heartbeat.js";
import { InvalidInputError, RollcallError } from "../protocol/errors.js";
import { frameErrorCode, type FrameErrorCode } from "../protocol/frames.js";
import { checkId } from "../protocol/ids.js";
import { callback, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { encodeState, type MemberState } from "../protocol/state.js";
import { reportError } from "../runtime/background.js";
import { HeartbeatBatch, HeartbeatWheel, heartbeatInterval } from "../runtime/heartbeats.js";
import { callNow, isBoolean, type Expect } from "../runtime/hooks.js";
import { Budgets, RateLimit } from "../runtime/rateLimit.js";
import { Subscriber } from "../runtime/subscriber.js";
import { ownSweeper, type Sweeper, type SweeperOptions } from "../runtime/sweeper.js";
import { Feeds } from "./feeds.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any application's event maps
export type AnyNamespace = Namespace<any, any, any, any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any application's event maps
export type AnySocket = Socket<any, any, any, any>;

/** What a socket sends and gets: event names on the Socket.IO connection. */
export const EVENTS = {
  /** Server to client: a room's event, as published (epoch, seq, prev). */
  event: "rollcall:event",
  /** Server to client: a room's roster (a Replica snapshot); the client asks with the room. */
  snapshot: "rollcall:snapshot",
  /** Server to client: `{ code, message, room? }` of a refused client event. */
  error: "rollcall:error",
  /** Client to server, each with the room (and the state), and an optional ack. */
  typing: "rollcall:typing",
  typingStop: "rollcall:typing-stop",
  state: "rollcall:state",
} as const;

export interface SocketIoPresenceOptions {
  /**
   * Who a socket is, asked once when it connects (after your middleware: `socket.data`, the
   * handshake): a user id, or null for a socket that is no member (it still hears its rooms).
   */
  user: (socket: AnySocket) => string | null | undefined;
  /**
   * Which Socket.IO rooms are presence rooms: presence follows `socket.join()` and `leave()` in
   * those. A socket's own id-room never is. `false`: only explicit `join()` calls. Default: all.
   */
  rooms?: ((room: string, socket: AnySocket) => boolean) | false;
  /** A member's state when it enters a room. Default none. */
  state?: (socket: AnySocket, room: string) => MemberState | undefined;
  /** Accept `rollcall:typing`, `rollcall:typing-stop` and `rollcall:state` from sockets. Default true. */
  clientEvents?: boolean;
  /**
   * Client events one user may send at once over all their sockets of this instance, then
   * `ratePerSecond` more each second (a token bucket). Defaults 20 and 5. A socket with no user
   * has a budget of its own.
   */
  rateBurst?: number;
  ratePerSecond?: number;
  /**
   * Sockets of one user on this instance, at most: one more gets a `rollcall:error`
   * TOO_MANY_SOCKETS and is disconnected. Default 64, the most connections of one user the
   * engine holds in a room.
   */
  maxSocketsPerUser?: number;
  /** How often every (socket, room) is heartbeated. Default a third of the presence window. */
  heartbeatMs?: number;
  /**
   * How long a socket that Socket.IO may recover (connection state recovery, a transport that
   * dropped) keeps its presence after the disconnect. Default 5 000 when the server has
   * connectionStateRecovery (at most its maxDisconnectionDuration), else 0.
   */
  recoveryMs?: number;
  /** The process's Subscriber; by default one of its own (one Redis connection). */
  subscriber?: Subscriber;
  /** Runs a Sweeper while open (true, or its options); false if the process runs one. Default true. */
  sweeper?: boolean | SweeperOptions;
}

interface Events {
  /** Redis outages, failing hooks, malformed room ids: never thrown. */
  error: [error: Error];
}

/** One socket: a rollcall connection of its user (or of nobody: an observer). */
interface Member {
  readonly socket: AnySocket;
  readonly user: string | null;
  readonly connection: string;
  /** The presence rooms it is in, each with its beat (null for an observer). */
  readonly rooms: Map<string, Beat | null>;
  readonly rate: RateLimit;
  strikes: number;
}

type Filter = (room: string, socket: AnySocket) => boolean;

/** What the `user` hook may name: a user, or nobody. */
const isUserOrNobody: Expect<string | null | undefined> = (
  value,
): value is string | null | undefined =>
  value === undefined || value === null || typeof value === "string";

/** What the `state` hook may give: a state (encodeState looks closer), or none. */
const isStateOrNone: Expect<MemberState | undefined> = (value): value is MemberState | undefined =>
  value === undefined || (typeof value === "object" && value !== null && !Array.isArray(value));

/** A client event's acknowledgement callback. */
type Ack = (reply: { ok: boolean; code?: FrameErrorCode; message?: string; room?: string }) => void;

interface Beat {
  readonly member: Member;
  readonly room: string;
  /** The join's heartbeat, which its leave must follow into Redis. */
  joined?: Promise<unknown>;
}

/** A disconnected socket whose presence is kept for its recovery. */
interface Held {
  readonly member: Member;
  readonly timer: NodeJS.Timeout;
}

const RECOVERABLE = new Set([
  "transport error",
  "transport close",
  "forced close",
  "ping timeout",
  "server shutting down",
  "forced server close",
]);

/**
 * Presence for one Socket.IO namespace: each socket with a user is a rollcall connection in the
 * presence rooms it is in, heartbeated in batches per bucket, leaving them when it leaves or
 * disconnects (a recoverable disconnect keeps it for `recoveryMs`). The rooms' events and
 * snapshots go to their local sockets only (`rollcall:event`, `rollcall:snapshot`): every
 * instance delivers what it hears from Redis to its own sockets, so nothing comes twice through
 * an adapter.
 */
export class SocketIoPresence extends EventEmitter<Events> {
  readonly heartbeatMs: number;
  readonly recoveryMs: number;
  private readonly members = new Map<string, Member>();
  private readonly held = new Map<string, Held>();
  private readonly wheel: HeartbeatWheel<Beat>;
  private readonly batch: HeartbeatBatch;
  private readonly feeds: Feeds;
  private readonly subscriber: Subscriber;
  private readonly ownsSubscriber: boolean;
  private readonly sweeper: Sweeper | undefined;
  private readonly identify: (socket: AnySocket) => string | null | undefined;
  private readonly filter: Filter | null;
  private readonly initial: SocketIoPresenceOptions["state"];
  private readonly clientEvents: boolean;
  private readonly rate: { rateBurst: number; ratePerSecond: number; maxSocketsPerUser: number };
  private readonly budgets: Budgets;
  private readonly detach: (() => void)[] = [];
  private closed = false;

  constructor(
    readonly nsp: AnyNamespace,
    readonly rollcall: Rollcall,
    options: SocketIoPresenceOptions,
  ) {
    super();
    const o = knownKeys(options, [
      "user",
      "rooms",
      "state",
      "clientEvents",
      "rateBurst",
      "ratePerSecond",
      "maxSocketsPerUser",
      "heartbeatMs",
      "recoveryMs",
      "subscriber",
      "sweeper",
    ]);
    const identify = callback<SocketIoPresenceOptions["user"]>("user", o.user);
    if (!identify) invalidOption("user is required: a function of the socket");
    this.identify = identify;
    const filter = o.rooms === false ? null : callback<Filter>("rooms", o.rooms);
    this.filter =
      o.rooms === false
        ? null
        : filter
          ? (room, s) => callNow("rooms", () => filter(room, s), isBoolean, "a boolean")
          : (room, s) => room !== s.id;
    this.initial = callback("state", o.state);
    this.clientEvents = o.clientEvents ?? true;
    if (typeof this.clientEvents !== "boolean") invalidOption("clientEvents must be a boolean");
    this.rate = {
      rateBurst: integer("rateBurst", o.rateBurst ?? 20, 1, 1_000_000),
      ratePerSecond: integer("ratePerSecond", o.ratePerSecond ?? 5, 1, 1_000_000),
      maxSocketsPerUser: integer("maxSocketsPerUser", o.maxSocketsPerUser ?? 64, 1, 10_000_000),
    };
    this.budgets = new Budgets(this.rate);
    this.heartbeatMs = heartbeatInterval(rollcall, o.heartbeatMs);
    const recovery = nsp.server._opts.connectionStateRecovery;
    const recoverable = recovery ? (recovery.maxDisconnectionDuration ?? 120_000) : 0;
    this.recoveryMs = integer(
      "recoveryMs",
      o.recoveryMs ?? Math.min(5_000, recoverable),
      0,
      3_600_000,
    );

    this.ownsSubscriber = o.subscriber === undefined;
    this.subscriber = o.subscriber ?? new Subscriber(rollcall);
    if (this.ownsSubscriber) this.subscriber.on("error", (error) => this.report(error));
    this.feeds = new Feeds(this.subscriber, {
      event: (room, event) => nsp.local.to(room).emit(EVENTS.event, event),
      snapshot: (room, snapshot) => nsp.local.to(room).emit(EVENTS.snapshot, snapshot),
      report: (error) => this.report(error),
    });
    this.batch = new HeartbeatBatch(rollcall);
    this.wheel = new HeartbeatWheel(this.heartbeatMs, (beats) => {
      rollcall.heartbeatMany(beats.map(heartbeatOf)).catch((error: unknown) => this.report(error));
    });
    this.wheel.start();
    this.sweeper = ownSweeper(rollcall, o.sweeper, (error) => this.report(error));

    const onConnection = (socket: AnySocket) => this.connected(socket);
    const onJoin = (room: string, id: string) => {
      const member = this.members.get(id);
      if (member && this.tracks(room, member.socket)) this.follow(member, room);
    };
    const onLeave = (room: string, id: string) => {
      const member = this.members.get(id);
      if (member && this.filter) void this.exit(member, room);
    };
    nsp.on("connection", onConnection);
    nsp.adapter.on("join-room", onJoin);
    nsp.adapter.on("leave-room", onLeave);
    this.detach.push(
      () => nsp.off("connection", onConnection),
      () => nsp.adapter.off("join-room", onJoin),
      () => nsp.adapter.off("leave-room", onLeave),
    );
    // Sockets connected before presence was attached: once the caller listens for errors.
    queueMicrotask(() => {
      for (const socket of nsp.sockets.values()) this.connected(socket);
    });
  }

  /**
   * Puts a socket in a presence room (and in the Socket.IO room, where the room's frames go):
   * what the room filter does on `socket.join()`, for `rooms: false`. Resolves once it is
   * present; in the room already, it is heartbeated (with the new state, when given).
   */
  async join(
    socket: AnySocket,
    room: string,
    options?: { state?: MemberState },
  ): Promise<HeartbeatResult> {
    const { state } = knownKeys(options, ["state"]);
    const member = this.memberOf(socket);
    const user = this.userOf(socket);
    checkId("room", room);
    // Checked alone: in the turn's batch, a bad state would fail its neighbours too.
    if (state !== undefined) encodeState(state, this.rollcall.settings.maxStateBytes);
    const joined =
      this.enter(member, room, state) ??
      this.batch.add({ room, user, connection: member.connection, ...(state ? { state } : {}) });
    if (!socket.rooms.has(room)) await socket.join(room);
    return await joined;
  }

  /**
   * Takes a socket out of a presence room: its connection leaves, and it no longer hears the room
   * (it stays in the Socket.IO room).
   */
  async leave(socket: AnySocket, room: string): Promise<void> {
    checkId("room", room);
    await this.exit(this.memberOf(socket), room);
  }

  async startTyping(socket: AnySocket, room: string): Promise<void> {
    await this.rollcall.startTyping(this.present(this.memberOf(socket), room), this.userOf(socket));
  }

  async stopTyping(socket: AnySocket, room: string): Promise<void> {
    await this.rollcall.stopTyping(this.present(this.memberOf(socket), room), this.userOf(socket));
  }

  async setState(socket: AnySocket, room: string, state: MemberState): Promise<void> {
    await this.rollcall.setState(
      this.present(this.memberOf(socket), room),
      this.userOf(socket),
      state,
    );
  }

  /** The presence rooms a socket is in. */
  roomsOf(socket: AnySocket): string[] {
    return [...(this.members.get(socket.id)?.rooms.keys() ?? [])];
  }

  /** Stops following the namespace: every socket leaves its presence rooms, held ones too. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const undo of this.detach) undo();
    const leaving = [...this.members.values()].map((m) => this.exitAll(m));
    for (const { member, timer } of this.held.values()) {
      clearTimeout(timer);
      leaving.push(this.exitAll(member));
    }
    this.members.clear();
    this.held.clear();
    await Promise.all(leaving);
    this.wheel.stop();
    await this.feeds.close();
    if (this.ownsSubscriber) this.subscriber.close();
    await this.sweeper?.stop();
  }

  /** Hands an error to 'error' listeners, or to process.emitWarning: never thrown. */
  report(error: unknown): void {
    reportError(this, error);
  }

  private tracks(room: string, socket: AnySocket): boolean {
    if (!this.filter || room === socket.id) return false;
    try {
      return this.filter(room, socket) === true;
    } catch (error) {
      this.report(error);
      return false;
    }
  }

  private connected(socket: AnySocket): void {
    if (this.closed || this.members.has(socket.id)) return;
    let user: string | null;
    try {
      const named = callNow("user", () => this.identify(socket), isUserOrNobody, "a user id");
      user = named === null || named === undefined ? null : checkId("user", named);
    } catch (error) {
      this.report(error);
      user = null;
    }
    const held = socket.recovered ? this.held.get(socket.id) : undefined;
    if (held) {
      clearTimeout(held.timer);
      this.held.delete(socket.id);
    }
    // A recovered socket goes on as the connection it was: no leave, no join.
    const same = held && held.member.user === user;
    if (held && !same) this.release(held.member);
    // The user's budget, shared by their sockets (a recovered one keeps its own count).
    const rate = same
      ? held.member.rate
      : user === null
        ? new RateLimit(this.rate.rateBurst, this.rate.ratePerSecond)
        : this.budgets.take(user);
    if (!rate) {
      const message = `too many sockets for this user (${this.rate.maxSocketsPerUser})`;
      socket.emit(EVENTS.error, { code: "TOO_MANY_SOCKETS", message });
      socket.disconnect(true);
      return;
    }
    const member: Member = {
      socket,
      user,
      connection: same ? held.member.connection : randomUUID(),
      rooms: new Map(),
      rate,
      strikes: 0,
    };
    this.members.set(socket.id, member);
    socket.once("disconnecting", (reason: string) => this.disconnecting(member, reason));
    if (this.clientEvents) this.listen(member);
    // Rooms joined before 'connection' (a middleware, a recovered session).
    for (const room of socket.rooms) {
      // A recovered socket's rooms were presence rooms before (also by explicit calls).
      const kept = same && held.member.rooms.has(room);
      if (kept || this.tracks(room, socket)) this.follow(member, room);
    }
    if (held) {
      // What the old socket was in and this one is not: left now (the new connection stays).
      for (const [room, beat] of held.member.rooms) {
        if (beat) this.wheel.remove(beat);
        const kept = same && member.rooms.has(room);
        if (!kept) void this.leaveRoom(held.member, room, beat);
      }
    }
  }

  /** Enters a room the filter tracks; a join that fails is the socket's `rollcall:error`. */
  private follow(member: Member, room: string): void {
    this.enter(member, room)?.catch((error: unknown) => this.refuse(member, error, room));
  }

  /** Enters a presence room; returns the join's heartbeat, or undefined if it was in already. */
  private enter(
    member: Member,
    room: string,
    state?: MemberState,
  ): Promise<HeartbeatResult> | undefined {
    if (member.rooms.has(room)) return undefined;
    try {
      checkId("room", room);
    } catch (error) {
      this.refuse(member, error, room);
      return undefined;
    }
    const beat: Beat | null = member.user === null ? null : { member, room };
    member.rooms.set(room, beat);
    this.feeds.follow(room, member);
    const snapshot = this.feeds.snapshot(room);
    if (snapshot) member.socket.emit(EVENTS.snapshot, snapshot);
    if (!beat) return undefined;
    // In the wheel at once: a join that fails (an outage) is made good by the next round.
    this.wheel.add(beat, this.rollcall.bucketOf(room));
    const first = state ?? this.stateOf(member, room);
    const joined = this.batch.add({ ...heartbeatOf(beat), ...(first ? { state: first } : {}) });
    beat.joined = joined;
    return joined;
  }

  /** The state hook's state, checked here: in the turn's batch it would fail its neighbours. */
  private stateOf(member: Member, room: string): MemberState | undefined {
    const initial = this.initial;
    if (!initial) return undefined;
    try {
      const state = callNow("state", () => initial(member.socket, room), isStateOrNone, "a state");
      if (state !== undefined) encodeState(state, this.rollcall.settings.maxStateBytes);
      return state;
    } catch (error) {
      this.report(error);
      return undefined;
    }
  }

  private async exit(member: Member, room: string): Promise<void> {
    if (!member.rooms.has(room)) return;
    const beat = member.rooms.get(room) ?? null;
    member.rooms.delete(room);
    if (beat) this.wheel.remove(beat);
    this.feeds.unfollow(room, member);
    await this.leaveRoom(member, room, beat);
  }

  private async exitAll(member: Member): Promise<void> {
    await Promise.all([...member.rooms.keys()].map((room) => this.exit(member, room)));
  }

  /** The engine's leave of a connection: failures are reported (the window expires it). */
  private async leaveRoom(member: Member, room: string, beat: Beat | null): Promise<void> {
    if (!beat || member.user === null) return;
    // A join still in the turn's batch would otherwise reach Redis after its leave, and stay.
    await beat.joined?.catch(() => undefined);
    try {
      await this.rollcall.leave(room, member.user, member.connection);
    } catch (error) {
      this.report(error);
    }
  }

  /**
   * The socket is going: its rooms are left, unless Socket.IO may recover it, in which case its
   * connection is kept (heartbeated) for `recoveryMs`, and left only if it does not come back.
   */
  private disconnecting(member: Member, reason: string): void {
    if (this.members.get(member.socket.id) !== member) return;
    this.members.delete(member.socket.id);
    if (this.closed) return;
    for (const room of member.rooms.keys()) this.feeds.unfollow(room, member);
    if (this.recoveryMs > 0 && RECOVERABLE.has(reason) && member.user !== null) {
      const timer = setTimeout(() => {
        if (this.held.get(member.socket.id)?.member !== member) return;
        this.held.delete(member.socket.id);
        this.release(member);
        for (const [room, beat] of member.rooms) {
          if (beat) this.wheel.remove(beat);
          void this.leaveRoom(member, room, beat);
        }
      }, this.recoveryMs);
      timer.unref();
      this.held.set(member.socket.id, { member, timer });
      return;
    }
    this.release(member);
    for (const [room, beat] of member.rooms) {
      if (beat) this.wheel.remove(beat);
      void this.leaveRoom(member, room, beat);
    }
  }

  /** A member is gone for good: it no longer counts against its user's sockets. */
  private release(member: Member): void {
    if (member.user !== null) this.budgets.release(member.user);
  }

  /** The client events of a socket: typing, state, and a snapshot asked for after a gap. */
  private listen(member: Member): void {
    const { socket } = member;
    type Run = (room: string, arg: unknown) => Promise<unknown> | void;
    const on = (name: string, run: Run, observers = false) => {
      socket.on(name, (...args: unknown[]) => {
        const last = args.at(-1);
        const ack = typeof last === "function" ? (args.pop() as Ack) : undefined;
        void this.clientEvent(member, args, run, observers, ack);
      });
    };
    const user = () => member.user!;
    on(EVENTS.typing, (room) => this.rollcall.startTyping(room, user()));
    on(EVENTS.typingStop, (room) => this.rollcall.stopTyping(room, user()));
    on(EVENTS.state, (room, state) => this.rollcall.setState(room, user(), state as MemberState));
    on(
      EVENTS.snapshot,
      (room) => {
        const snapshot = this.feeds.snapshot(room);
        if (snapshot) socket.emit(EVENTS.snapshot, snapshot);
      },
      true,
    );
  }

  /** One client event: rate-limited, only in the socket's presence rooms, answered by its ack. */
  private async clientEvent(
    member: Member,
    [room, arg]: unknown[],
    run: (room: string, arg: unknown) => Promise<unknown> | void,
    observers: boolean,
    ack: Ack | undefined,
  ): Promise<void> {
    const where = typeof room === "string" ? room : undefined;
    if (!member.rate.take()) {
      // A flood gets one error, then silence until it slows down; an ack is always answered.
      member.strikes += 1;
      if (member.strikes === 1 || ack) {
        this.fail(member, "RATE_LIMITED", "too many events", where, ack);
      }
      return;
    }
    member.strikes = 0;
    if (where === undefined || !(observers ? member.rooms.has(where) : member.rooms.get(where))) {
      const message = `not in presence room ${String(room)}`;
      return this.fail(member, "NOT_JOINED", message.slice(0, 300), where?.slice(0, 256), ack);
    }
    try {
      await run(where, arg);
      ack?.({ ok: true });
    } catch (error) {
      this.refuse(member, error, where, ack);
    }
  }

  private refuse(member: Member, error: unknown, room?: string, ack?: Ack): void {
    if (error instanceof RollcallError) {
      const code = frameErrorCode(error);
      if (code === "INTERNAL" || code === "UNAVAILABLE") this.report(error);
      return this.fail(member, code, error.message, room, ack);
    }
    this.report(error);
    this.fail(member, "INTERNAL", "the server failed to handle the event", room, ack);
  }

  private fail(
    member: Member,
    code: FrameErrorCode,
    message: string,
    room: string | undefined,
    ack: Ack | undefined,
  ): void {
    const error = { code, message, ...(room === undefined ? {} : { room }) };
    if (ack) ack({ ok: false, ...error });
    else member.socket.emit(EVENTS.error, error);
  }

  private memberOf(socket: AnySocket): Member {
    const member = this.members.get(socket.id);
    if (!member || member.socket !== socket) {
      throw new InvalidInputError(
        "INVALID_OPTION",
        "the socket is not connected to this namespace",
      );
    }
    return member;
  }

  private userOf(socket: AnySocket): string {
    const user = this.members.get(socket.id)?.user;
    if (!user)
      throw new InvalidInputError("INVALID_OPTION", "the socket has no user: not a member");
    return user;
  }

  private present(member: Member, room: string): string {
    checkId("room", room);
    if (!member.rooms.get(room)) {
      throw new InvalidInputError("INVALID_OPTION", `the socket is not present in room ${room}`);
    }
    return room;
  }
}

function heartbeatOf({ member, room }: Beat): Heartbeat {
  return { room, user: member.user!, connection: member.connection };
}
