import type { WebSocket } from "ws";
import type { EventType } from "../protocol/events.js";
import {
  FrameError,
  mayBeFollow,
  mayBeRefresh,
  parseClientFrame,
  SUBPROTOCOL_V2,
  type ClientFrame,
  type FrameErrorCode,
  type ServerFrame,
} from "../protocol/frames.js";
import { checkId, type IdPolicy } from "../protocol/ids.js";
import type { MemberState } from "../protocol/state.js";
import type { UserStatus } from "../protocol/users.js";
import type { Connection, Turn } from "./connection.js";
import type { Sink } from "./feed.js";
import { snapshotFrame } from "./snapshots.js";
import type { Expiries } from "./expiries.js";
import type { Host } from "./host.js";
import type { Identity } from "./identity.js";
import type { FrameSizes } from "./limits.js";
import type { RateLimit } from "./rateLimit.js";
import { UserFollow } from "./userFollow.js";
import { WATCHED_USERS } from "./userWatch.js";

/** Close codes the gateway uses (RFC 6455 §7.4.1; 4000-4999 are the application's). */
export const CLOSE = {
  goingAway: 1001,
  policy: 1008,
  tooBig: 1009,
  internal: 1011,
  tryLater: 1013,
  /** The token expired and no refresh came first: reconnect with a fresh one. */
  tokenExpired: 4001,
  /** A refresh named another user than the socket's. */
  identityChanged: 4003,
} as const;

/** How long a socket the gateway closes has to finish the close handshake before it is cut. */
export const CLOSE_GRACE_MS = 1_000;

const SESSION = Symbol("session");
type Tagged = WebSocket & { [SESSION]: Session };

// Listeners shared by every socket, each finding its session on the socket: no closures.
function onPong(this: WebSocket): void {
  (this as Tagged)[SESSION].alive = true;
}
function onMessage(this: WebSocket, data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) {
  (this as Tagged)[SESSION].receive(data, isBinary);
}
function onClose(this: WebSocket): void {
  (this as Tagged)[SESSION].ended();
}
/** ws closes a socket itself on a protocol error (1002, 1007, 1009): it acts no more either. */
function onError(this: WebSocket): void {
  (this as Tagged)[SESSION].shut();
}

/** What a host's rooms send a session: frames, encoded once for all the sockets that get them. */
export const SESSION_SINK: Sink<Session> = {
  events: (to, batch) => {
    for (const text of batch.frames(to.version)) to.sendText(text);
  },
  snapshot: (to, snapshot, ref) => to.sendText(snapshotFrame(snapshot, ref)),
  count: (to, room, count, ref) =>
    to.send({ type: "count", room, count, ...(ref === undefined ? {} : { ref }) }),
};

/** The bounds a session holds its socket to (the gateway's `limits`). */
export interface SessionLimits {
  /** Bytes queued to a slow reader before its socket is closed with 1013. */
  readonly maxBufferedBytes: number;
  /** Frames refused in a row, past the budget, before the socket is closed with 1008. */
  readonly rateBurst: number;
  /** Rooms one socket may be in at once, and watch at once. */
  readonly maxRoomsPerSocket: number;
}

/** What a session needs of the server it belongs to: a narrow view, not the server itself. */
export interface SessionHost {
  readonly host: Host<Session>;
  readonly limits: SessionLimits;
  /** The longest frame read, but for a refresh or a follow-users (see frameSizes). */
  readonly frameBytes: number;
  /** The longest refresh and follow-users frames read; without them a refresh is held to ws's
   * maxPayload, and a follow-users to frameBytes. */
  readonly longFrames?: Pick<FrameSizes, "refresh" | "follow">;
  /** Which users an identity may follow: all, none or those listed (the `authorizeUsers` hook);
   * without it, none. */
  readonly authorizeUsers?: (
    identity: Identity,
    users: readonly string[],
  ) => Promise<boolean | readonly string[]>;
  readonly ids: IdPolicy;
  /** Leeway past an identity's expiry before its socket closes. */
  readonly expiryLeewayMs: number;
  readonly expiries: Expiries<Session>;
  /** Whether an identity may be in a room (its rooms and the `authorize` hook agree). */
  allowed(identity: Identity, room: string): Promise<boolean>;
  /** The most members a room may hold, or undefined (a failing `capacity` hook throws). */
  capacity(room: string): number | undefined;
  /** The socket closed: the gateway forgets it (the session then leaves its rooms). */
  ended(session: Session): void;
  /** The identity a refresh token establishes, or a FrameError (INVALID_TOKEN). */
  reauthenticate(token: string, current: Identity): Promise<Identity>;
  report(error: unknown): void;
}

/**
 * One WebSocket: a rollcall connection of the user the server authenticated, on the gateway's
 * host. Frames are handled one at a time, in order (the connection's turns); each reaches Redis
 * at most once, within the socket's rate limit. The session owns what only the protocol knows:
 * the socket's identity and expiry, the rooms whose count it watches, its frame budget.
 */
export class Session {
  /** The socket's rollcall connection: its rooms, its calls in order. */
  readonly connection: Connection<Session>;
  /** The rooms whose count the socket watches (made at the first: an idle socket costs little). */
  private watched: Set<string> | undefined;
  /** The users whose status the socket follows (`follow-users`), if any. */
  private follow: UserFollow | undefined;
  /** The protocol version the socket speaks (its subprotocol): 2 has coalesced and count frames. */
  readonly version: 1 | 2;
  /** Answered the last ping: a socket that does not by the next one is dead and terminated. */
  alive = true;
  private strikes = 0;
  /** The gateway decided to close the socket: no frame of it is handled from then on. */
  private shutting = false;
  private closed = false;
  /** Where the socket's expiry is filed. */
  private expiry: number | undefined;

  constructor(
    private readonly gateway: SessionHost,
    readonly ws: WebSocket,
    private current: Identity,
    /** The user's frame budget, shared by all their sockets. */
    private readonly rate: RateLimit,
  ) {
    this.version = ws.protocol === SUBPROTOCOL_V2 ? 2 : 1;
    this.connection = gateway.host.connect(current.user, this);
    this.armExpiry();
  }

  /** Listens to the socket, and tells it who it is (`welcome`). */
  open(): void {
    const { ws } = this;
    (ws as Tagged)[SESSION] = this;
    ws.on("pong", onPong);
    ws.on("message", onMessage);
    ws.on("error", onError); // a broken socket closes next; 'close' does the rest
    ws.on("close", onClose);
    this.send({
      type: "welcome",
      user: this.user,
      connection: this.connection.id,
      heartbeatMs: this.gateway.host.heartbeatMs,
      expiresAt: this.current.expiresAt ?? null,
    });
  }

  /** Pings the socket, or terminates it when it did not answer the last ping. */
  ping(): void {
    if (!this.alive) return this.ws.terminate();
    this.alive = false;
    this.ws.ping();
  }

  get identity(): Identity {
    return this.current;
  }

  get user(): string {
    return this.current.user;
  }

  send(frame: ServerFrame): void {
    this.sendText(JSON.stringify(frame));
  }

  /** A frame already encoded (the same text, or bytes, for every socket of a room that gets it). */
  sendText(text: string | Buffer): void {
    if (this.closed || this.shutting) return;
    // A reader this far behind is a slow consumer: its queue would only grow.
    if (this.ws.bufferedAmount > this.gateway.limits.maxBufferedBytes) {
      this.shut(CLOSE.tryLater, "slow consumer");
      return;
    }
    // A text frame, whichever it is given as.
    this.ws.send(text, { binary: false });
  }

  receive(data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean): void {
    if (this.closed || this.shutting) return;
    // ws hands a text frame over as one Buffer (no fragments arrays without a custom binaryType).
    const bytes = Buffer.isBuffer(data) ? data : undefined;
    // ws takes frames as long as a refresh or a follow-users may be: any other is held to the
    // frame limit, and one past it that cannot be either is closed before it is parsed (a huge
    // state costs no parse).
    const size = bytes?.length ?? 0;
    const long = size > this.gateway.frameBytes;
    const mayBeLong = (b: Buffer) =>
      (size <= this.longest("refresh") && mayBeRefresh(b)) ||
      (size <= this.longest("follow-users") && mayBeFollow(b));
    if (long && !mayBeLong(bytes!)) return this.shut(CLOSE.tooBig, "frame too big");
    let frame: ClientFrame | undefined;
    let refused: unknown;
    try {
      if (isBinary) throw new FrameError("BAD_FRAME", "frames are JSON text");
      frame = parseClientFrame(bytes ? bytes.toString("utf8") : "", this.version);
    } catch (error) {
      refused = error;
    }
    if (long && size > this.longest(frame?.type)) return this.shut(CLOSE.tooBig, "frame too big");
    if (!this.rate.take()) {
      // A flood gets one error, then the socket is closed if it goes on.
      this.strikes += 1;
      if (this.strikes === 1) this.fail("RATE_LIMITED", "too many frames", frame?.ref);
      if (this.strikes > this.gateway.limits.rateBurst) this.shut(CLOSE.policy, "rate limit");
      return;
    }
    this.strikes = 0;
    this.gateway.host.rollcall.metrics.add("rollcall.gateway.frames", 1, {
      type: frame?.type ?? "bad",
    });
    // In the connection's order, refusals too: replies go out in the order of the frames.
    void this.connection.inTurn(async (turn) => {
      try {
        if (!frame) throw refused;
        await this.handle(frame, turn);
      } catch (error) {
        this.refuse(error, frame?.ref);
      }
    });
  }

  /** The socket closed, cleanly or not: leaves every room, like a handler's `finally` block. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.expiry !== undefined) this.gateway.expiries.remove(this, this.expiry);
    for (const room of this.watched ?? []) this.gateway.host.unwatch(room, this);
    this.watched = undefined;
    await Promise.all([this.unfollowUsers(), this.connection.close()]);
  }

  /** The longest a frame of a type may be (refresh and follow-users have limits of their own). */
  private longest(type: string | undefined): number {
    const { frameBytes, longFrames } = this.gateway;
    if (type === "refresh") return longFrames?.refresh ?? Infinity; // ws's maxPayload holds it
    if (type === "follow-users") return longFrames?.follow ?? frameBytes;
    return frameBytes;
  }

  private async handle(frame: ClientFrame, turn: Turn): Promise<void> {
    if (this.closed || this.shutting) return;
    switch (frame.type) {
      case "join":
        await this.join(turn, frame.room, frame.state, frame.types, frame.ref, frame.invisible);
        return;
      case "leave":
        await turn.leave(frame.room);
        break;
      case "typing":
        await turn.startTyping(frame.room);
        break;
      case "typing-stop":
        await turn.stopTyping(frame.room);
        break;
      case "state":
        await turn.setState(frame.room, frame.state);
        break;
      case "heartbeat":
        await turn.beat();
        break;
      case "refresh":
        await this.refresh(turn, frame.token, frame.ref);
        return;
      case "watch":
        await this.watch(frame.room, frame.ref);
        return;
      case "unwatch":
        if (!this.watched?.delete(frame.room)) {
          throw new FrameError("NOT_JOINED", `not watching room ${frame.room}`, frame.ref);
        }
        this.gateway.host.unwatch(frame.room, this);
        break;
      case "follow-users":
        await this.followUsers(frame.users, frame.ref);
        return;
      case "unfollow-users":
        await this.unfollowUsers();
        break;
    }
    if (frame.ref !== undefined) this.send({ type: "ack", ref: frame.ref });
  }

  /** Joins a room, or rejoins it: heartbeat (join), then a snapshot for its replica. */
  private async join(
    turn: Turn,
    room: string,
    state: MemberState | undefined,
    types: EventType[] | undefined,
    ref: string | undefined,
    invisible: boolean | undefined,
  ): Promise<void> {
    const { ids, limits } = this.gateway;
    checkId("room", room, ids);
    const capacity = this.gateway.capacity(room);
    const result = await turn.join(room, {
      // Asked for by the frame, or imposed by the identity: read at every join (a rejoin too).
      invisible: invisible === true || this.identity.invisible === true,
      ...(state === undefined ? {} : { state }),
      ...(capacity === undefined ? {} : { capacity }),
      ...(types === undefined ? {} : { types }),
      ...(ref === undefined ? {} : { ref }),
      admit: async () => {
        const { maxRoomsPerSocket } = limits;
        if (this.connection.size >= maxRoomsPerSocket) {
          throw new FrameError("TOO_MANY_ROOMS", `at most ${maxRoomsPerSocket} rooms`, ref);
        }
        if (!(await this.gateway.allowed(this.identity, room))) {
          throw new FrameError("FORBIDDEN", `not allowed in room ${room}`, ref);
        }
      },
    });
    if (result.full) throw new FrameError("ROOM_FULL", `room ${room} is full`, ref);
  }

  /**
   * Watches a room's member count: a count frame now (the answer), then one when the count
   * changes. It is no member, and hears no event.
   */
  private async watch(room: string, ref: string | undefined): Promise<void> {
    const { ids, limits } = this.gateway;
    checkId("room", room, ids);
    const watched = (this.watched ??= new Set());
    if (watched.has(room)) throw new FrameError("BAD_FRAME", `watching ${room} already`, ref);
    if (watched.size >= limits.maxRoomsPerSocket) {
      throw new FrameError(
        "TOO_MANY_ROOMS",
        `at most ${limits.maxRoomsPerSocket} watched rooms`,
        ref,
      );
    }
    if (!(await this.gateway.allowed(this.identity, room))) {
      throw new FrameError("FORBIDDEN", `not allowed in room ${room}`, ref);
    }
    watched.add(room);
    try {
      await this.gateway.host.watch(room, this, ref);
    } catch (error) {
      watched.delete(room);
      throw error;
    }
  }

  /**
   * Follows users' status, instead of any followed before: a `users` frame now (the answer, with
   * the users the `authorizeUsers` hook refused as `denied`), then the changes, batched (see
   * UserFollow). A refusal (bad input, FORBIDDEN) changes nothing; an outage while the new list
   * is read leaves the socket following no one.
   */
  private async followUsers(asked: readonly string[], ref: string | undefined): Promise<void> {
    if (asked.length === 0 || asked.length > WATCHED_USERS) {
      const message = `follow-users takes 1 to ${WATCHED_USERS} user ids, got ${asked.length}`;
      throw new FrameError("INVALID_OPTION", message);
    }
    const users = [...new Set(asked.map((user) => checkId("user", user, this.gateway.ids)))];
    if (!this.gateway.host.rollcall.settings.userStatus) {
      throw new FrameError("FORBIDDEN", "this deployment keeps no users' status (userStatus)");
    }
    const allowed = await this.followable(this.identity, users);
    await this.unfollowUsers();
    const kept = new Set(allowed);
    const denied = users.filter((user) => !kept.has(user));
    const answer = (statuses: UserStatus[]) =>
      this.send({
        type: "users",
        statuses,
        ...(ref === undefined ? {} : { ref }),
        ...(denied.length === 0 ? {} : { denied }),
      });
    if (allowed.length === 0) return answer([]);
    const follow = await UserFollow.open(this.gateway.host.subscriber, allowed, (statuses) =>
      this.send({ type: "users", statuses }),
    );
    if (this.closed || this.shutting) return follow.close();
    this.follow = follow;
    answer(follow.answer());
  }

  private async unfollowUsers(): Promise<void> {
    const follow = this.follow;
    this.follow = undefined;
    await follow?.close();
  }

  /** Which of `users` an identity may follow, in their order; FORBIDDEN if none may be. */
  private async followable(identity: Identity, users: readonly string[]): Promise<string[]> {
    const { authorizeUsers } = this.gateway;
    if (!authorizeUsers) {
      const message = "the gateway has no authorizeUsers hook: users' status is private";
      throw new FrameError("FORBIDDEN", message);
    }
    const answer = await authorizeUsers(identity, users);
    if (answer === false) throw new FrameError("FORBIDDEN", "not allowed to follow these users");
    if (answer === true) return [...users];
    const allowed = new Set(answer);
    return users.filter((user) => allowed.has(user));
  }

  /** A refreshed identity keeps its follow only if every followed user is still allowed. */
  private async refollow(identity: Identity): Promise<void> {
    const users = this.follow?.users;
    if (!users) return;
    let allowed: string[] = [];
    try {
      allowed = await this.followable(identity, users);
    } catch (error) {
      if (!(error instanceof FrameError)) this.gateway.report(error);
    }
    if (allowed.length === users.length) return;
    await this.unfollowUsers();
    const message = "the new token does not allow following these users: unfollowed";
    this.send({ type: "error", code: "FORBIDDEN", message });
  }

  /**
   * A fresh token: the socket lives on to its expiry, and leaves the rooms it no longer allows.
   * A token of another user is no refresh: the socket closes.
   */
  private async refresh(turn: Turn, token: string, ref: string | undefined): Promise<void> {
    const identity = await this.gateway.reauthenticate(token, this.current);
    if (identity.user !== this.user) {
      this.shut(CLOSE.identityChanged, "the token names another user");
      return;
    }
    this.current = identity;
    this.armExpiry();
    for (const room of [...(this.watched ?? [])]) {
      if (await this.stillAllowed(identity, room)) continue;
      this.watched?.delete(room);
      this.gateway.host.unwatch(room, this);
      const message = `the new token does not allow room ${room}: unwatched`;
      this.send({ type: "error", code: "FORBIDDEN", message, room });
    }
    for (const room of this.connection.rooms()) {
      if (await this.stillAllowed(identity, room)) continue;
      await turn.leave(room);
      const message = `the new token does not allow room ${room}: left`;
      this.send({ type: "error", code: "FORBIDDEN", message, room });
    }
    await this.refollow(identity);
    const expiresAt = identity.expiresAt ?? null;
    this.send({ type: "refreshed", expiresAt, ...(ref === undefined ? {} : { ref }) });
  }

  /** Whether a refreshed identity keeps a room; a failing `authorize` hook keeps none. */
  private async stillAllowed(identity: Identity, room: string): Promise<boolean> {
    try {
      return await this.gateway.allowed(identity, room);
    } catch (error) {
      this.gateway.report(error);
      return false;
    }
  }

  /** Files the socket to be closed with 4001 when its identity expires (plus the leeway). */
  private armExpiry(): void {
    const { expiries, expiryLeewayMs } = this.gateway;
    if (this.expiry !== undefined) expiries.remove(this, this.expiry);
    const { expiresAt } = this.current;
    this.expiry =
      expiresAt === undefined || expiresAt === null
        ? undefined
        : expiries.add(this, expiresAt + expiryLeewayMs);
  }

  /** The identity expired, and no refresh came first. */
  expire(): void {
    this.expiry = undefined;
    this.shut(CLOSE.tokenExpired, "token expired");
  }

  /**
   * The gateway closes the socket (with `code`; without one, ws is closing it already): from now
   * on no frame of it is handled, and it is cut off if the client has not finished the close
   * handshake within CLOSE_GRACE_MS, whatever the ping interval.
   */
  shut(code?: number, reason?: string): void {
    if (this.shutting || this.closed) return;
    this.shutting = true;
    if (code !== undefined) this.ws.close(code, reason);
    const cut = setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS);
    cut.unref();
    this.ws.once("close", () => clearTimeout(cut));
  }

  /** The socket's 'close' (a listener shared by every socket). */
  ended(): void {
    this.gateway.ended(this);
  }

  private refuse(error: unknown, ref?: string): void {
    const { code, message } = this.gateway.host.refusal(error);
    const frameRef = error instanceof FrameError && error.ref !== undefined ? error.ref : ref;
    this.fail(code, message, frameRef);
  }

  private fail(code: FrameErrorCode, message: string, ref?: string): void {
    this.gateway.host.rollcall.metrics.add("rollcall.gateway.refusals", 1, { reason: code });
    this.send(
      ref === undefined ? { type: "error", code, message } : { type: "error", code, message, ref },
    );
  }
}
