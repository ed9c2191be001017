import { ResyncPacer } from "../protocol/backoff.js";
import { checkEvent, type PresenceEvent } from "../protocol/events.js";
import type { FrameErrorCode } from "../protocol/frames.js";
import {
  Replica,
  type ReplicaRoster,
  type RosterChange,
  type Snapshot,
} from "../protocol/replica.js";
import type { MemberState } from "../protocol/state.js";
import { Emitter } from "./emitter.js";

/** What this helper needs of a socket.io-client `Socket`. */
export interface SocketLike {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- socket.io-client's listeners
  on(event: string, listener: (...args: any[]) => void): unknown;
  emit(event: string, ...args: unknown[]): unknown;
}

/** A `rollcall:error` from the server: a client event it refused. */
export class PresenceError extends Error {
  constructor(
    readonly code: FrameErrorCode,
    message: string,
    readonly room?: string,
  ) {
    super(message);
    this.name = "PresenceError";
  }
}

interface PresenceEvents extends Record<string, unknown[]> {
  /** A room's roster changed; read `roster(room)` for the whole of it. */
  change: [room: string, change: RosterChange];
  /** A snapshot replaced a room's roster (on entering it, after a reconnect or a gap). */
  sync: [room: string];
  /** The server refused a client event (RATE_LIMITED, NOT_JOINED, …) without an ack to answer. */
  error: [error: PresenceError];
}

interface Reply {
  ok: boolean;
  code?: FrameErrorCode;
  message?: string;
  room?: string;
}

/**
 * The rosters of the rooms a Socket.IO socket is in, for the page: `rollcall:snapshot` and
 * `rollcall:event` feed one pure Replica per room (the engine's own rules: a gap or an epoch
 * change holds events and asks the server for a snapshot). The socket's rooms are the server's
 * business: a room appears here with its first snapshot.
 */
export class SocketPresence extends Emitter<PresenceEvents> {
  private readonly replicas = new Map<string, { replica: Replica; pacer: ResyncPacer }>();
  private readonly typingSentAt = new Map<string, number>();

  constructor(
    private readonly socket: SocketLike,
    /** At most one `rollcall:typing` per room this often. Default 2 000 ms. */
    private readonly typingIntervalMs = 2_000,
  ) {
    super();
    socket.on("rollcall:snapshot", (snapshot: Snapshot) => this.install(snapshot));
    socket.on("rollcall:event", (event: unknown) => this.receive(event));
    socket.on("rollcall:error", (e: Reply) => {
      this.emit("error", new PresenceError(e.code ?? "INTERNAL", e.message ?? "", e.room));
    });
    // Events are missed until the server's next snapshot (it sends one as the socket re-enters).
    socket.on("disconnect", () => {
      for (const { replica } of this.replicas.values()) replica.hold();
    });
  }

  /** The rooms this socket has rosters of. */
  get rooms(): string[] {
    return [...this.replicas.keys()];
  }

  /** A room's live roster, once its first snapshot came. */
  roster(room: string): ReplicaRoster | undefined {
    return this.replicas.get(room)?.replica.roster;
  }

  /** Stops following a room the socket left. */
  forget(room: string): void {
    this.replicas.delete(room);
  }

  /** Call on every keystroke: sends `rollcall:typing` at most once per typingIntervalMs. */
  typing(room: string): void {
    const now = Date.now();
    if (now - (this.typingSentAt.get(room) ?? -Infinity) < this.typingIntervalMs) return;
    this.typingSentAt.set(room, now);
    void this.send("rollcall:typing", room).catch(() => undefined);
  }

  /** Call when the message is sent or the input loses focus. */
  stopTyping(room: string): void {
    if (!this.typingSentAt.delete(room)) return;
    void this.send("rollcall:typing-stop", room).catch(() => undefined);
  }

  /** Replaces the user's state in the room; rejects with the server's PresenceError. */
  setState(room: string, state: MemberState): Promise<void> {
    return this.send("rollcall:state", room, state);
  }

  private send(event: string, room: string, ...args: unknown[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.emit(event, room, ...args, (reply: Reply) => {
        if (reply?.ok) resolve();
        else reject(new PresenceError(reply?.code ?? "INTERNAL", reply?.message ?? "", room));
      });
    });
  }

  private entry(room: string) {
    let entry = this.replicas.get(room);
    if (!entry)
      this.replicas.set(room, (entry = { replica: new Replica(room), pacer: new ResyncPacer() }));
    return entry;
  }

  private install(snapshot: Snapshot): void {
    if (typeof snapshot?.room !== "string") return;
    const outcome = this.entry(snapshot.room).replica.install(snapshot);
    this.tell(snapshot.room, outcome.changes);
    this.emit("sync", snapshot.room);
    if (outcome.resync) this.resync(snapshot.room);
  }

  private receive(value: unknown): void {
    let event: PresenceEvent;
    try {
      event = checkEvent(value);
    } catch {
      return;
    }
    // An event before the room's first snapshot is held by its new replica, for that snapshot.
    const outcome = this.entry(event.room).replica.receive(event);
    this.tell(event.room, outcome.changes);
    if (outcome.resync) this.resync(event.room);
  }

  /** A gap: the server's replica answers with a snapshot (spaced out if gaps keep coming). */
  private resync(room: string): void {
    const entry = this.replicas.get(room);
    if (!entry) return;
    setTimeout(() => {
      if (this.replicas.get(room) === entry && entry.replica.holding) {
        this.socket.emit("rollcall:snapshot", room);
      }
    }, entry.pacer.delay(Date.now()));
  }

  private tell(room: string, changes: readonly RosterChange[]): void {
    for (const change of changes) this.emit("change", room, change);
  }
}
