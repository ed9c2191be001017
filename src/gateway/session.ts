import { randomUUID } from "node:crypto";
import type { WebSocket } from "ws";
import { RollcallError } from "../protocol/errors.js";
import {
  FrameError,
  frameErrorCode,
  parseClientFrame,
  SUBPROTOCOL_V2,
  type ClientFrame,
  type FrameErrorCode,
  type ServerFrame,
} from "../protocol/frames.js";
import type { Heartbeat, Rollcall } from "../engine/rollcall.js";
import { HookError } from "../runtime/hooks.js";
import type { Identity } from "./auth.js";
import type { Expiries } from "./expiries.js";
import type { RateLimit } from "../runtime/rateLimit.js";
import type { Limits } from "./limits.js";
import type { Rooms } from "./rooms.js";

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

/** What a session needs of its gateway: a narrow view, not the gateway itself. */
export interface SessionHost {
  readonly rollcall: Rollcall;
  readonly limits: Limits;
  /** The longest frame read, but for a refresh (see frameSizes). */
  readonly frameBytes: number;
  readonly rooms: Rooms;
  /** Leeway past an identity's expiry before its socket closes. */
  readonly expiryLeewayMs: number;
  readonly expiries: Expiries<Session>;
  /** The socket closed: the gateway forgets it (the session then leaves its rooms). */
  ended(session: Session): void;
  /** The identity a refresh token establishes, or a FrameError (INVALID_TOKEN). */
  reauthenticate(token: string, current: Identity): Promise<Identity>;
  report(error: unknown): void;
}

/** One (socket, room) pair, as the heartbeat wheel holds it. */
export interface Beat {
  readonly session: Session;
  readonly room: string;
}

/**
 * One WebSocket: a rollcall connection of the user the server authenticated. Frames are handled
 * one at a time, in order; each reaches Redis at most once, within the socket's rate limit.
 */
export class Session {
  /** The socket's connection id in every room it joins. */
  readonly connection = randomUUID();
  private joined: Map<string, Beat> | undefined;
  private watched: Set<string> | undefined;
  /** The protocol version the socket speaks (its subprotocol): 2 has coalesced and count frames. */
  readonly version: 1 | 2;
  /** Answered the last ping: a socket that does not by the next one is dead and terminated. */
  alive = true;
  private strikes = 0;
  /** The frames being handled, in order (none yet: an idle socket keeps no promise). */
  private queue: Promise<void> | undefined;
  /** The gateway decided to close the socket: no frame of it is handled from then on. */
  private shutting = false;
  private closed = false;
  /** Where the socket's expiry is filed. */
  private expiry: number | undefined;

  constructor(
    private readonly host: SessionHost,
    readonly ws: WebSocket,
    private current: Identity,
    /** The user's frame budget, shared by all their sockets. */
    private readonly rate: RateLimit,
  ) {
    this.version = ws.protocol === SUBPROTOCOL_V2 ? 2 : 1;
    this.armExpiry();
  }

  /** The heartbeat of this socket's connection in a room. */
  heartbeat(room: string): Heartbeat {
    return { room, user: this.user, connection: this.connection };
  }

  /** The rooms the socket is in (made at the first join: an idle socket should cost little). */
  get rooms(): Map<string, Beat> {
    return (this.joined ??= new Map());
  }

  /** The rooms whose count the socket watches. */
  get watching(): Set<string> {
    return (this.watched ??= new Set());
  }

  get identity(): Identity {
    return this.current;
  }

  get user(): string {
    return this.identity.user;
  }

  send(frame: ServerFrame): void {
    this.sendText(JSON.stringify(frame));
  }

  /** A frame already encoded (the same text, or bytes, for every socket of a room that gets it). */
  sendText(text: string | Buffer): void {
    if (this.closed || this.shutting) return;
    // A reader this far behind is a slow consumer: its queue would only grow.
    if (this.ws.bufferedAmount > this.host.limits.maxBufferedBytes) {
      this.shut(CLOSE.tryLater, "slow consumer");
      return;
    }
    // A text frame, whichever it is given as.
    this.ws.send(text, { binary: false });
  }

  receive(data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean): void {
    if (this.closed || this.shutting) return;
    let frame: ClientFrame | undefined;
    let refused: unknown;
    try {
      if (isBinary) throw new FrameError("BAD_FRAME", "frames are JSON text");
      // ws hands a text frame over as one Buffer (no fragments arrays without a custom binaryType).
      frame = parseClientFrame(Buffer.isBuffer(data) ? data.toString("utf8") : "", this.version);
    } catch (error) {
      refused = error;
    }
    // ws takes frames as long as a refresh may be: any other is held to the frame limit.
    if ((data as Buffer).length > this.host.frameBytes && frame?.type !== "refresh") {
      this.shut(CLOSE.tooBig, "frame too big");
      return;
    }
    if (!this.rate.take()) {
      // A flood gets one error, then the socket is closed if it goes on.
      this.strikes += 1;
      if (this.strikes === 1) this.fail("RATE_LIMITED", "too many frames", frame?.ref);
      if (this.strikes > this.host.limits.rateBurst) this.shut(CLOSE.policy, "rate limit");
      return;
    }
    this.strikes = 0;
    this.host.rollcall.metrics.add("rollcall.gateway.frames", 1, { type: frame?.type ?? "bad" });
    // In the queue, refusals too: replies go out in the order of the frames they answer.
    this.queue = (this.queue ?? Promise.resolve()).then(() =>
      frame
        ? this.handle(frame).catch((e: unknown) => this.refuse(e, frame.ref))
        : this.refuse(refused),
    );
  }

  /** The socket closed, cleanly or not: leaves every room, like a handler's `finally` block. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.expiry !== undefined) this.host.expiries.remove(this, this.expiry);
    await this.queue;
    const { rooms } = this.host;
    for (const room of this.watched ?? []) rooms.unwatch(this, room);
    const joined = [...(this.joined?.keys() ?? [])];
    await Promise.all(joined.map((room) => rooms.leave(this, room)));
  }

  private async handle(frame: ClientFrame): Promise<void> {
    if (this.closed || this.shutting) return;
    const { rollcall, rooms } = this.host;
    switch (frame.type) {
      case "join":
        await rooms.join(this, frame.room, frame.state, frame.types, frame.ref);
        return;
      case "leave":
        if (this.rooms.has(frame.room)) await rooms.leave(this, frame.room);
        break;
      case "typing":
        await rollcall.startTyping(this.inRoom(frame.room, frame.ref), this.user);
        break;
      case "typing-stop":
        await rollcall.stopTyping(this.inRoom(frame.room, frame.ref), this.user);
        break;
      case "state":
        await rollcall.setState(this.inRoom(frame.room, frame.ref), this.user, frame.state);
        break;
      case "heartbeat":
        await rooms.beat(this);
        break;
      case "refresh":
        await this.refresh(frame.token, frame.ref);
        return;
      case "watch":
        await rooms.watch(this, frame.room, frame.ref);
        return;
      case "unwatch":
        if (!this.watching.has(frame.room)) {
          throw new FrameError("NOT_JOINED", `not watching room ${frame.room}`, frame.ref);
        }
        rooms.unwatch(this, frame.room);
        break;
    }
    if (frame.ref !== undefined) this.send({ type: "ack", ref: frame.ref });
  }

  /**
   * A fresh token: the socket lives on to its expiry, and leaves the rooms it no longer allows.
   * A token of another user is no refresh: the socket closes.
   */
  private async refresh(token: string, ref: string | undefined): Promise<void> {
    const identity = await this.host.reauthenticate(token, this.current);
    if (identity.user !== this.user) {
      this.shut(CLOSE.identityChanged, "the token names another user");
      return;
    }
    this.current = identity;
    this.armExpiry();
    const { rooms } = this.host;
    for (const room of [...this.watching]) {
      if (await this.stillAllowed(identity, room)) continue;
      rooms.unwatch(this, room);
      const message = `the new token does not allow room ${room}: unwatched`;
      this.send({ type: "error", code: "FORBIDDEN", message, room });
    }
    for (const room of [...this.rooms.keys()]) {
      if (await this.stillAllowed(identity, room)) continue;
      await rooms.leave(this, room);
      const message = `the new token does not allow room ${room}: left`;
      this.send({ type: "error", code: "FORBIDDEN", message, room });
    }
    const expiresAt = identity.expiresAt ?? null;
    this.send({ type: "refreshed", expiresAt, ...(ref === undefined ? {} : { ref }) });
  }

  /** Files the socket to be closed with 4001 when its identity expires (plus the leeway). */
  private armExpiry(): void {
    const { expiries, expiryLeewayMs } = this.host;
    if (this.expiry !== undefined) expiries.remove(this, this.expiry);
    const { expiresAt } = this.current;
    this.expiry =
      expiresAt === undefined || expiresAt === null
        ? undefined
        : expiries.add(this, expiresAt + expiryLeewayMs);
  }

  /** Whether a refreshed identity keeps a room; a failing `authorize` hook keeps none. */
  private async stillAllowed(identity: Identity, room: string): Promise<boolean> {
    try {
      return await this.host.rooms.allowed(identity, room);
    } catch (error) {
      this.host.report(error);
      return false;
    }
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
    this.host.ended(this);
  }

  private inRoom(room: string, ref: string | undefined): string {
    if (!this.rooms.has(room)) throw new FrameError("NOT_JOINED", `not in room ${room}`, ref);
    return room;
  }

  private refuse(error: unknown, ref?: string): void {
    if (error instanceof FrameError) return this.fail(error.code, error.message, error.ref ?? ref);
    if (error instanceof HookError && error.failure === "timeout") {
      this.host.report(error);
      return this.fail("UNAVAILABLE", "the server could not decide in time", ref);
    }
    if (error instanceof RollcallError) {
      const code = frameErrorCode(error);
      if (code === "INTERNAL" || code === "UNAVAILABLE") this.host.report(error);
      return this.fail(code, error.message, ref);
    }
    this.host.report(error);
    this.fail("INTERNAL", "the server failed to handle the frame", ref);
  }

  private fail(code: FrameErrorCode, message: string, ref?: string): void {
    this.host.rollcall.metrics.add("rollcall.gateway.refusals", 1, { reason: code });
    this.send(
      ref === undefined ? { type: "error", code, message } : { type: "error", code, message, ref },
    );
  }
}
