import type { ClientFrame, FrameErrorCode, ServerFrame } from "../protocol/frames.js";

/** An error frame from the gateway, or a connection that could not be made. */
export class GatewayError extends Error {
  constructor(
    readonly code: FrameErrorCode | "CLOSED",
    message: string,
  ) {
    super(message);
    this.name = "GatewayError";
  }
}

/**
 * What a room or a count watch needs of the client it belongs to: the wiring between a page's
 * objects, not for the page to call (it stays out of the published types).
 */
export interface Link {
  /** Sends a frame; with `expectReply`, resolves on its ack or snapshot, rejects on its error. */
  send(frame: ClientFrame, expectReply?: boolean): Promise<void>;
  /**
   * Sends a request whose reply carries data: `answered` gets the reply as it arrives, before any
   * frame after it is handled; the promise then resolves, or rejects on the request's error.
   */
  ask(frame: ClientFrame, answered: (reply: ServerFrame) => void): Promise<void>;
  /** The app left the room. */
  forget(room: string): void;
  /** The app no longer watches the room's count. */
  forgetCount(room: string): void;
  /** The app no longer follows users with this list: true if it was the client's current one. */
  forgetUsers(list: object): boolean;
  readonly typingIntervalMs: number;
}
