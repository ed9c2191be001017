import { randomUUID } from "node:crypto";
import type { WebSocket } from "ws";
import { RollcallError } from "../protocol/errors.js";
import {
  FrameError,
  parseClientFrame,
  type ClientFrame,
  type FrameErrorCode,
  type ServerFrame,
} from "../protocol/frames.js";
import type { Identity } from "./auth.js";
import type { Gateway } from "./gateway.js";
import { RateLimit } from "./limits.js";

/** Close codes the gateway uses (RFC 6455 §7.4.1). */
export const CLOSE = {
  goingAway: 1001,
  policy: 1008,
  tooBig: 1009,
  internal: 1011,
  tryLater: 1013,
} as const;

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
  readonly rooms = new Map<string, Beat>();
  /** Answered the last ping: a socket that does not by the next one is dead and terminated. */
  alive = true;
  private readonly rate: RateLimit;
  private strikes = 0;
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly gateway: Gateway,
    readonly ws: WebSocket,
    readonly identity: Identity,
  ) {
    const { rateBurst, ratePerSecond } = gateway.limits;
    this.rate = new RateLimit(rateBurst, ratePerSecond);
  }

  get user(): string {
    return this.identity.user;
  }

  send(frame: ServerFrame): void {
    if (this.closed) return;
    // A reader this far behind is a slow consumer: its queue would only grow.
    if (this.ws.bufferedAmount > this.gateway.limits.maxBufferedBytes) {
      this.ws.close(CLOSE.tryLater, "slow consumer");
      return;
    }
    this.ws.send(JSON.stringify(frame));
  }

  receive(data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean): void {
    if (this.closed) return;
    let frame: ClientFrame | undefined;
    let refused: unknown;
    try {
      if (isBinary) throw new FrameError("BAD_FRAME", "frames are JSON text");
      // ws hands a text frame over as one Buffer (no fragments arrays without a custom binaryType).
      frame = parseClientFrame(Buffer.isBuffer(data) ? data.toString("utf8") : "");
    } catch (error) {
      refused = error;
    }
    if (!this.rate.take()) {
      // A flood gets one error, then the socket is closed if it goes on.
      this.strikes += 1;
      if (this.strikes === 1) this.fail("RATE_LIMITED", "too many frames", frame?.ref);
      if (this.strikes > this.gateway.limits.rateBurst) this.ws.close(CLOSE.policy, "rate limit");
      return;
    }
    this.strikes = 0;
    this.gateway.rollcall.metrics.add("rollcall.gateway.frames", 1, { type: frame?.type ?? "bad" });
    // In the queue, refusals too: replies go out in the order of the frames they answer.
    this.queue = this.queue.then(() =>
      frame
        ? this.handle(frame).catch((e: unknown) => this.refuse(e, frame.ref))
        : this.refuse(refused),
    );
  }

  /** The socket closed, cleanly or not: leaves every room, like a handler's `finally` block. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await Promise.all([...this.rooms.keys()].map((room) => this.gateway.leave(this, room)));
  }

  private async handle(frame: ClientFrame): Promise<void> {
    if (this.closed) return;
    const { gateway } = this;
    switch (frame.type) {
      case "join":
        await gateway.join(this, frame.room, frame.state, frame.types, frame.ref);
        return;
      case "leave":
        if (this.rooms.has(frame.room)) await gateway.leave(this, frame.room);
        break;
      case "typing":
        await gateway.rollcall.startTyping(this.joined(frame.room, frame.ref), this.user);
        break;
      case "typing-stop":
        await gateway.rollcall.stopTyping(this.joined(frame.room, frame.ref), this.user);
        break;
      case "state":
        await gateway.rollcall.setState(this.joined(frame.room, frame.ref), this.user, frame.state);
        break;
      case "heartbeat":
        await Promise.all([...this.rooms.keys()].map((room) => gateway.beat(this, room)));
        break;
    }
    if (frame.ref !== undefined) this.send({ type: "ack", ref: frame.ref });
  }

  private joined(room: string, ref: string | undefined): string {
    if (!this.rooms.has(room)) throw new FrameError("NOT_JOINED", `not in room ${room}`, ref);
    return room;
  }

  private refuse(error: unknown, ref?: string): void {
    if (error instanceof FrameError) return this.fail(error.code, error.message, error.ref ?? ref);
    if (error instanceof RollcallError) {
      const code = codeOf(error);
      if (code === "INTERNAL" || code === "UNAVAILABLE") this.gateway.report(error);
      return this.fail(code, error.message, ref);
    }
    this.gateway.report(error);
    this.fail("INTERNAL", "the server failed to handle the frame", ref);
  }

  private fail(code: FrameErrorCode, message: string, ref?: string): void {
    this.gateway.rollcall.metrics.add("rollcall.gateway.refusals", 1, { reason: code });
    this.send(
      ref === undefined ? { type: "error", code, message } : { type: "error", code, message, ref },
    );
  }
}

function codeOf(error: RollcallError): FrameErrorCode {
  switch (error.code) {
    case "INVALID_ID":
    case "INVALID_STATE":
    case "INVALID_OPTION":
      return error.code;
    case "REDIS_UNAVAILABLE":
      return "UNAVAILABLE";
    default:
      return "INTERNAL";
  }
}
