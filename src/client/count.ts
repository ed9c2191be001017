import type { GatewayError, Link } from "./link.js";
import { Emitter } from "./emitter.js";

interface CountEvents extends Record<string, unknown[]> {
  /** The room's member count changed (the gateway says so at most every countIntervalMs). */
  count: [count: number];
  /** The gateway refused the watch (FORBIDDEN, TOO_MANY_ROOMS, …): it is over. */
  error: [error: GatewayError];
}

/**
 * A room whose member count the client watches without joining it (protocol version 2): no
 * presence, no events, a count frame when the count changes. Watched again after a reconnect.
 */
export class RoomCount extends Emitter<CountEvents> {
  /** Settles with the first count, or fails if the gateway refuses the watch. */
  readonly ready: Promise<void>;
  private current: number | null = null;
  private resolveReady!: () => void;
  private rejectReady!: (error: GatewayError) => void;
  private ended = false;

  /** @internal Made by RollcallClient.watch(). */
  constructor(
    private readonly client: Link,
    readonly room: string,
  ) {
    super();
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined); // a refusal also reaches 'error' listeners
  }

  /** The room's member count, as last told (null before the first). */
  get count(): number | null {
    return this.current;
  }

  /** Stops watching. */
  async unwatch(): Promise<void> {
    this.ended = true;
    this.client.forgetCount(this.room);
    await this.client.send({ type: "unwatch", room: this.room }, true).catch(() => undefined);
  }

  /** @internal (Re)watches on the socket: the gateway answers with a count frame. */
  rewatch(): void {
    this.client.send({ type: "watch", room: this.room }, true).catch((error: GatewayError) => {
      if (error.code !== "CLOSED") this.refused(error); // CLOSED: the reconnect watches again
    });
  }

  /** @internal The client closed: a first count still awaited never comes. */
  end(error: GatewayError): void {
    this.ended = true;
    this.rejectReady(error);
  }

  /** @internal */
  refused(error: GatewayError): void {
    this.ended = true;
    this.client.forgetCount(this.room);
    this.rejectReady(error);
    this.emit("error", error);
  }

  /** @internal */
  receive(count: number): void {
    if (this.ended) return;
    const changed = count !== this.current;
    this.current = count;
    this.resolveReady();
    if (changed) this.emit("count", count);
  }
}
