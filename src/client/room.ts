import { ResyncPacer } from "../protocol/backoff.js";
import type { EventType, PresenceEvent } from "../protocol/events.js";
import {
  Replica,
  type ReplicaRoster,
  type RosterChange,
  type Snapshot,
} from "../protocol/replica.js";
import type { MemberState } from "../protocol/state.js";
import type { GatewayError, Link } from "./link.js";
import { Emitter } from "./emitter.js";

interface RoomEvents extends Record<string, unknown[]> {
  /** The roster changed; read `roster` for the whole of it. */
  change: [change: RosterChange];
  /** A snapshot replaced the roster (on join, after a reconnect or a gap). */
  sync: [];
  /** The gateway refused this room (FORBIDDEN, TOO_MANY_ROOMS, …): it is left. */
  error: [error: GatewayError];
}

/**
 * A room the client is in: a live replica of its roster (the engine's pure Replica, fed by the
 * gateway's snapshots and events), and the user's own actions in it.
 */
export class Room extends Emitter<RoomEvents> {
  /** Settles with the first snapshot, or fails if the gateway refuses the room. */
  readonly ready: Promise<void>;
  private readonly replica: Replica;
  /** Resyncs that keep coming (messages that do not fit) are spaced out, never a loop. */
  private readonly pacer = new ResyncPacer();
  private resyncTimer: ReturnType<typeof setTimeout> | undefined;
  private typingSentAt = -Infinity;
  private resolveReady!: () => void;
  private rejectReady!: (error: GatewayError) => void;
  private left = false;

  /** @internal Made by RollcallClient.join(). */
  constructor(
    private readonly client: Link,
    readonly room: string,
    private state: MemberState | null,
    private readonly types: EventType[] | undefined,
    /** Joined unseen (see RollcallClient.join). */
    readonly invisible = false,
  ) {
    super();
    this.replica = new Replica(room);
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined); // a refusal also reaches 'error' listeners
  }

  get roster(): ReplicaRoster {
    return this.replica.roster;
  }

  /** Every event since the last snapshot applied. */
  get synced(): boolean {
    return !this.replica.holding;
  }

  /**
   * Call on every keystroke: sends `typing` at most once per typingIntervalMs (never in a room
   * joined invisible: the gateway refuses it).
   */
  typing(): void {
    if (this.invisible) return;
    const now = Date.now();
    if (now - this.typingSentAt < this.client.typingIntervalMs) return;
    this.typingSentAt = now;
    this.client.send({ type: "typing", room: this.room }).catch(() => undefined);
  }

  /** Call when the message is sent or the input loses focus: stops the indicator at once. */
  stopTyping(): void {
    if (this.typingSentAt === -Infinity) return;
    this.typingSentAt = -Infinity;
    this.client.send({ type: "typing-stop", room: this.room }).catch(() => undefined);
  }

  /** Replaces the user's state in the room (kept across reconnects). */
  setState(state: MemberState): Promise<void> {
    this.state = state;
    return this.client.send({ type: "state", room: this.room, state }, true);
  }

  async leave(): Promise<void> {
    this.end();
    this.client.forget(this.room);
    await this.client.send({ type: "leave", room: this.room }, true).catch(() => undefined);
  }

  /** @internal (Re)joins on the socket: the gateway answers with a snapshot. */
  rejoin(): void {
    // Events that came before this frame was sent are older than the snapshot it brings.
    this.replica.requestSnapshot();
    const frame = {
      type: "join" as const,
      room: this.room,
      ...(this.state ? { state: this.state } : {}),
      ...(this.types ? { types: this.types } : {}),
      ...(this.invisible ? { invisible: true } : {}),
    };
    this.client.send(frame, true).catch((error: GatewayError) => {
      if (error.code !== "CLOSED") this.refused(error); // CLOSED: the reconnect rejoins
    });
  }

  /** @internal The gateway refused the room, or left it after a refresh: it is left here too. */
  refused(error: GatewayError): void {
    this.end();
    this.client.forget(this.room);
    this.rejectReady(error);
    this.emit("error", error);
  }

  /** @internal */
  install(snapshot: Snapshot): void {
    if (this.left) return;
    const outcome = this.replica.install(snapshot);
    this.tell(outcome.changes);
    this.emit("sync");
    this.resolveReady();
    if (outcome.resync) this.resync();
  }

  /** @internal */
  receive(event: PresenceEvent): void {
    if (this.left) return;
    const outcome = this.replica.receive(event);
    this.tell(outcome.changes);
    if (outcome.resync) this.resync();
  }

  /** A gap or a conflict: a rejoin brings a snapshot, at once unless resyncs keep coming. */
  private resync(): void {
    if (this.resyncTimer !== undefined) return;
    this.resyncTimer = setTimeout(() => {
      this.resyncTimer = undefined;
      if (!this.left) this.rejoin();
    }, this.pacer.delay(Date.now()));
  }

  /** @internal The socket dropped: events are being missed until the reconnect's snapshot. */
  lost(): void {
    this.replica.hold();
  }

  /** @internal */
  end(): void {
    this.left = true;
    clearTimeout(this.resyncTimer);
  }

  private tell(changes: readonly RosterChange[]): void {
    for (const change of changes) this.emit("change", change);
  }
}
