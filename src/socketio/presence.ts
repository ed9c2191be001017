import { EventEmitter } from "node:events";
import type { Namespace, Socket } from "socket.io";
import type { Rollcall } from "../engine/rollcall.js";
import type { HeartbeatResult } from "../engine/scripts/heartbeat.js";
import { InvalidInputError } from "../protocol/errors.js";
import type { PresenceEvent } from "../protocol/events.js";
import { FrameError, type FrameErrorCode } from "../protocol/frames.js";
import { checkId } from "../protocol/ids.js";
import { callback, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { encodeState, type MemberState } from "../protocol/state.js";
import { reportError } from "../runtime/background.js";
import type { Connection, Turn } from "../runtime/connection.js";
import type { Sink } from "../runtime/feed.js";
import { callNow, isBoolean, type Expect } from "../runtime/hooks.js";
import { Host } from "../runtime/host.js";
import { Budgets, RateLimit } from "../runtime/rateLimit.js";
import type { Subscriber } from "../runtime/subscriber.js";
import type { SweeperOptions } from "../runtime/sweeper.js";

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
  /**
   * A presence event of a room with sockets here, from any instance, in order: also the leave
   * of a user whose last socket here left the room, when its grace ends (the room stays
   * subscribed for it: LocalRoom.awaitLeave).
   */
  event: [event: PresenceEvent, room: string];
  /** Redis outages, failing hooks, malformed room ids: never thrown. */
  error: [error: Error];
}

/** One socket: a rollcall connection of its user (or of nobody: an observer). */
interface Member {
  readonly socket: AnySocket;
  /** Its presence: null for an observer, which only hears the rooms it is in (`observed`). */
  readonly connection: Connection<Member> | null;
  readonly observed: Set<string>;
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
 * Presence for one Socket.IO namespace, an adapter over rollcall's connection host: each socket
 * with a user is a rollcall connection in the presence rooms it is in, heartbeated in batches,
 * leaving them when it leaves or disconnects (a recoverable disconnect keeps it for
 * `recoveryMs`). The rooms' events and snapshots go to their local sockets only
 * (`rollcall:event`, `rollcall:snapshot`): every instance delivers what it hears from Redis to
 * its own sockets, so nothing comes twice through an adapter.
 */
export class SocketIoPresence extends EventEmitter<Events> {
  readonly heartbeatMs: number;
  readonly recoveryMs: number;
  private readonly host: Host<Member>;
  private readonly members = new Map<string, Member>();
  private readonly held = new Map<string, Held>();
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
    const recovery = nsp.server._opts.connectionStateRecovery;
    const recoverable = recovery ? (recovery.maxDisconnectionDuration ?? 120_000) : 0;
    this.recoveryMs = integer(
      "recoveryMs",
      o.recoveryMs ?? Math.min(5_000, recoverable),
      0,
      3_600_000,
    );
    // What the host's rooms send a socket (each event as published, and snapshots), and the
    // events of each room once, for `event`.
    const sink: Sink<Member> = {
      events: (to, batch) => {
        for (const event of batch.events) to.socket.emit(EVENTS.event, event);
      },
      snapshot: (to, snapshot) => to.socket.emit(EVENTS.snapshot, snapshot),
      heard: (room, events) => {
        for (const event of events) this.tell(event, room);
      },
    };
    this.host = new Host<Member>(rollcall, sink, (error) => this.report(error), {
      ...(o.heartbeatMs === undefined ? {} : { heartbeatMs: o.heartbeatMs }),
      ...(o.subscriber === undefined ? {} : { subscriber: o.subscriber }),
      ...(o.sweeper === undefined ? {} : { sweeper: o.sweeper }),
    });
    this.heartbeatMs = this.host.heartbeatMs;

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
   * Puts a socket in a presence room (and in the Socket.IO room): what the room filter does on
   * `socket.join()`, for `rooms: false`. Resolves once it is present; in the room already, it is
   * heartbeated (with the new state, when given).
   */
  async join(
    socket: AnySocket,
    room: string,
    options?: { state?: MemberState },
  ): Promise<HeartbeatResult> {
    const { state } = knownKeys(options, ["state"]);
    const connection = this.connectionOf(socket);
    checkId("room", room);
    // Checked alone: in the turn's batch, a bad state would fail its neighbours too.
    if (state !== undefined) encodeState(state, this.rollcall.settings.maxStateBytes);
    const joined = connection.join(room, {
      state: state ?? this.stateOf(socket, room),
      retry: true,
    });
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
    await this.present(socket, room).startTyping(room);
  }

  async stopTyping(socket: AnySocket, room: string): Promise<void> {
    await this.present(socket, room).stopTyping(room);
  }

  async setState(socket: AnySocket, room: string, state: MemberState): Promise<void> {
    await this.present(socket, room).setState(room, state);
  }

  /** The presence rooms a socket is in. */
  roomsOf(socket: AnySocket): string[] {
    const member = this.members.get(socket.id);
    return member?.connection?.rooms() ?? [...(member?.observed ?? [])];
  }

  /** Stops following the namespace: every socket leaves its presence rooms, held ones too. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const undo of this.detach) undo();
    const members = [...this.members.values()];
    for (const { member, timer } of this.held.values()) {
      clearTimeout(timer);
      members.push(member);
    }
    this.members.clear();
    this.held.clear();
    await Promise.all(members.flatMap((m) => (m.connection ? [m.connection.close()] : [])));
    await this.host.close();
  }

  /** Hands an error to 'error' listeners, or to process.emitWarning: never thrown. */
  report(error: unknown): void {
    reportError(this, error);
  }

  private tracks(room: string, socket: AnySocket): boolean {
    if (!this.filter || room === socket.id) return false;
    try {
      return this.filter(room, socket);
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
    const kept = held?.member.connection?.user === user ? held.member : undefined;
    if (held && !kept) this.letGo(held.member);
    // The user's budget, shared by their sockets (a recovered one keeps its own count).
    const rate = kept
      ? kept.rate
      : user === null
        ? new RateLimit(this.rate.rateBurst, this.rate.ratePerSecond)
        : this.budgets.take(user);
    if (!rate) {
      const message = `too many sockets for this user (${this.rate.maxSocketsPerUser})`;
      socket.emit(EVENTS.error, { code: "TOO_MANY_SOCKETS", message });
      socket.disconnect(true);
      return;
    }
    let connection: Connection<Member> | null = kept?.connection ?? null;
    const member: Member = {
      socket,
      get connection() {
        return connection;
      },
      observed: new Set(),
      rate,
      strikes: 0,
    };
    if (user !== null && !connection) connection = this.host.connect(user, member);
    this.members.set(socket.id, member);
    socket.once("disconnecting", (reason: string) => this.disconnecting(member, reason));
    if (this.clientEvents) this.listen(member);
    if (kept && connection) {
      // The rooms it was in and is not now are left; those it is still in go on, their events
      // to this socket from a snapshot each.
      for (const room of connection.rooms()) {
        if (!socket.rooms.has(room)) void this.exit(member, room);
      }
      void connection.rebind(member).catch((e: unknown) => this.report(e));
    }
    // Rooms joined before 'connection' (a middleware, a recovered session).
    for (const room of socket.rooms) {
      if (this.tracks(room, socket) && !connection?.has(room)) this.follow(member, room);
    }
  }

  /** Enters a room the filter tracks; a join that fails is the socket's `rollcall:error`. */
  private follow(member: Member, room: string): void {
    try {
      checkId("room", room);
    } catch (error) {
      return this.refuse(member, error, room);
    }
    const { connection } = member;
    const entered = connection
      ? connection.join(room, { state: this.stateOf(member.socket, room), retry: true })
      : this.observe(member, room);
    entered.catch((error: unknown) => this.refuse(member, error, room));
  }

  /** An observer hears a room's events, from a snapshot. */
  private async observe(member: Member, room: string): Promise<void> {
    if (member.observed.has(room)) return;
    member.observed.add(room);
    await this.host.follow(room, member);
  }

  /** The state hook's state, checked here: in the turn's batch it would fail its neighbours. */
  private stateOf(socket: AnySocket, room: string): MemberState | undefined {
    const initial = this.initial;
    if (!initial) return undefined;
    try {
      const state = callNow("state", () => initial(socket, room), isStateOrNone, "a state");
      if (state !== undefined) encodeState(state, this.rollcall.settings.maxStateBytes);
      return state;
    } catch (error) {
      this.report(error);
      return undefined;
    }
  }

  /** Leaves a presence room (an observer stops hearing it); a failure is reported. */
  private async exit(member: Member, room: string): Promise<void> {
    if (member.observed.delete(room)) return this.host.unfollow(room, member);
    await member.connection?.inTurn((turn) => this.leaveHeard(turn, member, room));
  }

  /** A member is gone for good: its rooms are left, its socket no longer counts. */
  private letGo(member: Member): void {
    for (const room of member.observed) this.host.unfollow(room, member);
    const { connection } = member;
    if (!connection) return;
    this.budgets.release(connection.user);
    // In its turn: the rooms it is in then, joins asked for before included.
    void connection.inTurn((turn) =>
      Promise.all(connection.rooms().map((room) => this.leaveHeard(turn, member, room))),
    );
    void connection.close();
  }

  /**
   * A member's connection leaves a room, which stays subscribed until the user's leave is passed
   * on (at once, or when the grace ends), so that `event` reports it even when no socket here is
   * left in the room; then the room is released (closed, unless followed again). A failure is
   * reported.
   */
  private async leaveHeard(turn: Turn, member: Member, room: string): Promise<void> {
    const connection = member.connection!;
    const release = () => {
      if (!connection.has(room)) this.host.release(room, member);
    };
    await this.host
      .room(room)
      .awaitLeave(connection.user, () => turn.leave(room), release)
      .catch((error: unknown) => this.report(error));
  }

  /** Tells `event` listeners of a room's event; one that throws is reported. */
  private tell(event: PresenceEvent, room: string): void {
    try {
      this.emit("event", event, room);
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
    if (this.recoveryMs > 0 && RECOVERABLE.has(reason) && member.connection) {
      const timer = setTimeout(() => {
        if (this.held.get(member.socket.id)?.member !== member) return;
        this.held.delete(member.socket.id);
        this.letGo(member);
      }, this.recoveryMs);
      timer.unref();
      this.held.set(member.socket.id, { member, timer });
      return;
    }
    this.letGo(member);
  }

  /** The client events of a socket: typing, state, and a snapshot asked for after a gap. */
  private listen(member: Member): void {
    const { socket } = member;
    type Run = (room: string, arg: unknown) => Promise<unknown>;
    const on = (name: string, run: Run) => {
      socket.on(name, (...args: unknown[]) => {
        const last = args.at(-1);
        const ack = typeof last === "function" ? (args.pop() as Ack) : undefined;
        void this.clientEvent(member, args, run, ack);
      });
    };
    // A member's are carried out in its connection's turn: after the join they follow, which
    // they need (NOT_JOINED otherwise).
    const connection = () => {
      if (!member.connection) throw new FrameError("NOT_JOINED", "an observer is in no room");
      return member.connection;
    };
    on(EVENTS.typing, (room) => connection().startTyping(room));
    on(EVENTS.typingStop, (room) => connection().stopTyping(room));
    on(EVENTS.state, (room, state) => connection().setState(room, state as MemberState));
    on(EVENTS.snapshot, (room) => this.resend(member, room));
  }

  /** A room's snapshot again, for a socket in it (or observing it) that lost track. */
  private async resend(member: Member, room: string): Promise<void> {
    const { connection } = member;
    if (!connection) {
      if (!member.observed.has(room)) throw new FrameError("NOT_JOINED", `not in room ${room}`);
      return this.host.follow(room, member);
    }
    await connection.inTurn(async () => {
      if (!connection.has(room)) throw new FrameError("NOT_JOINED", `not in room ${room}`);
      await this.host.follow(room, member);
    });
  }

  /** One client event: rate-limited, answered by its ack (or an error event). */
  private async clientEvent(
    member: Member,
    [room, arg]: unknown[],
    run: (room: string, arg: unknown) => Promise<unknown>,
    ack: Ack | undefined,
  ): Promise<void> {
    const where = typeof room === "string" ? room.slice(0, 256) : undefined;
    if (!member.rate.take()) {
      // A flood gets one error, then silence until it slows down; an ack is always answered.
      member.strikes += 1;
      if (member.strikes === 1 || ack) {
        this.fail(member, "RATE_LIMITED", "too many events", where, ack);
      }
      return;
    }
    member.strikes = 0;
    try {
      if (typeof room !== "string") throw new FrameError("NOT_JOINED", "name a presence room");
      await run(room, arg);
      ack?.({ ok: true });
    } catch (error) {
      this.refuse(member, error, where, ack);
    }
  }

  private refuse(member: Member, error: unknown, room?: string, ack?: Ack): void {
    const { code, message } = this.host.refusal(error);
    this.fail(member, code, message, room, ack);
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

  private connectionOf(socket: AnySocket): Connection<Member> {
    const connection = this.memberOf(socket).connection;
    if (!connection) {
      throw new InvalidInputError("INVALID_OPTION", "the socket has no user: not a member");
    }
    return connection;
  }

  private present(socket: AnySocket, room: string): Connection<Member> {
    checkId("room", room);
    const connection = this.connectionOf(socket);
    if (!connection.has(room)) {
      throw new InvalidInputError("INVALID_OPTION", `the socket is not present in room ${room}`);
    }
    return connection;
  }
}
