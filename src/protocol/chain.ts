import { carriesCount, type PresenceEvent } from "./events.js";

/**
 * Where an event stands against the chain a consumer follows. next: it follows the last event
 * applied; covered: applied already, or older than the snapshot; gap: events were missed (or it
 * belongs to another epoch); conflict: it claims a number already passed with other content, so
 * something that was not rollcall wrote to the room's channel.
 */
export type Fit = "next" | "covered" | "gap" | "conflict";

/** Events remembered by number: a forged event that took a real one's number is caught by it. */
const WINDOW = 8;

/**
 * One room's chain of events as one consumer follows it: a snapshot's number, then events each of
 * whose `prev` is the number before. Between the snapshot and the last event applied every event
 * of the room was applied, so a number in that range that was not applied, or that comes back
 * with other content, is no duplicate but a conflict. Pure: the Replica and the gateway's room
 * feed both follow one.
 */
export class Chain {
  private currentEpoch = "";
  private last = 0;
  /** Numbers at or below it are covered by the snapshot, or by events no longer remembered. */
  private floor = 0;
  private empty = true;
  /** Fingerprints of the last events applied, by number, oldest first. */
  private readonly recent = new Map<number, number>();

  get epoch(): string {
    return this.currentEpoch;
  }

  /** The number of the last event applied, or of the snapshot when none was since. */
  get seq(): number {
    return this.last;
  }

  fit(event: PresenceEvent): Fit {
    if (event.epoch !== this.currentEpoch) {
      // A snapshot of a bucket that had no epoch yet ('') showed an empty room: the epoch its
      // first event starts follows it.
      const first = this.currentEpoch === "" && this.empty && event.prev === 0;
      return first && event.seq > this.last ? "next" : "gap";
    }
    if (event.seq > this.last) {
      return event.prev === this.last || (event.prev === 0 && this.empty) ? "next" : "gap";
    }
    if (event.seq <= this.floor) return "covered";
    return this.recent.get(event.seq) === fingerprint(event) ? "covered" : "conflict";
  }

  /** Starts over from a snapshot, whatever was applied before: its numbers are the truth. */
  install(epoch: string, seq: number, count: number): void {
    this.currentEpoch = epoch;
    this.last = seq;
    this.floor = seq;
    this.empty = count === 0;
    this.recent.clear();
  }

  /** Records an event that fit as next. */
  apply(event: PresenceEvent): void {
    this.currentEpoch = event.epoch;
    this.last = event.seq;
    if (carriesCount(event)) this.empty = event.count === 0;
    this.recent.set(event.seq, fingerprint(event));
    if (this.recent.size > WINDOW) {
      const [oldest] = this.recent.keys();
      this.recent.delete(oldest!);
      this.floor = oldest!;
    }
  }
}

/**
 * A 32-bit FNV-1a hash of the event's fields but its log id (the live message and the log's copy
 * of one event are equal), in key order: small enough to keep a few per room on a gateway.
 */
function fingerprint(event: PresenceEvent): number {
  const fields = event as unknown as Record<string, unknown>;
  let hash = 0x811c9dc5;
  for (const key of Object.keys(fields).sort()) {
    if (key === "log") continue;
    const text = `${key}=${JSON.stringify(fields[key])};`;
    for (let i = 0; i < text.length; i++) {
      hash ^= text.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
  }
  return hash;
}

/** Events held while a snapshot is awaited, at most: the oldest go first (the snapshot has them). */
const MAX_HELD = 1_000;

/**
 * A consumer's events in order: each one that follows the chain goes to `apply`; a gap or a
 * conflict asks for a snapshot, and events are held until it is installed, then those that follow
 * it are applied. Events held when the snapshot was asked for (`requestSnapshot`) were published
 * before it was read: rollcall's own are covered by it or follow it, so one that still does not
 * fit is not rollcall's, and is dropped rather than asking for another snapshot. One message
 * costs at most one resync. Pure: the Replica and the gateway's room feed are built on it.
 */
export class Sequencer {
  private readonly chain = new Chain();
  /** Events held while a snapshot is awaited; null when events apply directly. */
  private held: PresenceEvent[] | null = [];
  /** How many of the held events came before the snapshot being read was asked for. */
  private before = 0;

  constructor(private readonly apply: (event: PresenceEvent) => void) {}

  get epoch(): string {
    return this.chain.epoch;
  }

  get seq(): number {
    return this.chain.seq;
  }

  get holding(): boolean {
    return this.held !== null;
  }

  /** The events held while a snapshot is awaited, in the order they came. */
  get pending(): readonly PresenceEvent[] {
    return this.held ?? [];
  }

  /** Holds events from now on: they may be incomplete (a lost connection) until a snapshot. */
  hold(): void {
    this.held ??= [];
  }

  /** A snapshot is about to be read: every event held so far was published before it. */
  requestSnapshot(): void {
    this.hold();
    this.before = this.held!.length;
  }

  /** Applies, drops or holds an event; true when a snapshot is needed. */
  receive(event: PresenceEvent): boolean {
    if (this.held) {
      if (this.held.length >= MAX_HELD) {
        this.held.shift();
        if (this.before > 0) this.before -= 1;
      }
      this.held.push(event);
      return false;
    }
    const fit = this.chain.fit(event);
    if (fit === "next") this.take(event);
    if (fit === "next" || fit === "covered") return false;
    this.held = [event];
    this.before = 0;
    return true;
  }

  /**
   * Starts over from a snapshot, whatever was applied before (even above its number), then
   * applies the held events of its epoch that follow it; true when another snapshot is needed.
   */
  install(epoch: string, seq: number, count: number): boolean {
    this.chain.install(epoch, seq, count);
    // Held events of another epoch are history: the snapshot shows where they led.
    return this.replay(this.held ?? [], this.before, (event) => event.epoch === epoch);
  }

  /** Events read back from the log, before the held ones; true when they leave a gap. */
  recover(events: readonly PresenceEvent[]): boolean {
    return this.replay([...events, ...(this.held ?? [])], 0, () => true);
  }

  private replay(
    queue: readonly PresenceEvent[],
    before: number,
    keep: (event: PresenceEvent) => boolean,
  ): boolean {
    this.held = null;
    this.before = 0;
    for (const [i, event] of queue.entries()) {
      if (!keep(event)) continue;
      if (i < before) {
        if (this.chain.fit(event) === "next") this.take(event);
      } else if (this.receive(event)) {
        // The rest are held again, behind the event that revealed the gap.
        this.held!.push(...queue.slice(i + 1));
        return true;
      }
    }
    return false;
  }

  private take(event: PresenceEvent): void {
    this.chain.apply(event);
    this.apply(event);
  }
}
