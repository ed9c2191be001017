import type { Heartbeat, HeartbeatOutcome, Rollcall } from "../engine/rollcall.js";
import type { HeartbeatResult } from "../engine/scripts/heartbeat.js";
import type { RollcallError } from "../protocol/errors.js";
import { integer } from "../protocol/options.js";

/**
 * Sends a set of entries once per interval from a single timer, slot by slot: the caller puts
 * each entry in a slot (the gateway and the Socket.IO integration: its room's bucket), and a
 * slot's entries go out together, so 10,000 sockets are neither 10,000 timers nor 10,000 calls
 * landing in the same millisecond.
 */
export class HeartbeatWheel<T> {
  private readonly slots: Set<T>[];
  private readonly where = new Map<T, number>();
  private next = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly beat: (entries: T[]) => void,
    slotCount = 20,
  ) {
    this.slots = Array.from({ length: slotCount }, () => new Set<T>());
  }

  get size(): number {
    return this.where.size;
  }

  get slotCount(): number {
    return this.slots.length;
  }

  /** Adds an entry to a slot (taken modulo the slot count). */
  add(entry: T, slot: number): void {
    this.remove(entry);
    const at = slot % this.slots.length;
    this.slots[at]!.add(entry);
    this.where.set(entry, at);
  }

  remove(entry: T): void {
    const slot = this.where.get(entry);
    if (slot === undefined) return;
    this.slots[slot]!.delete(entry);
    this.where.delete(entry);
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.intervalMs / this.slots.length);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const slot = this.slots[this.next]!;
    this.next = (this.next + 1) % this.slots.length;
    if (slot.size > 0) this.beat([...slot]);
  }
}

/** A heartbeat waiting for its batch, and how it settles. */
interface Pending {
  readonly heartbeat: Heartbeat;
  readonly resolve: (result: HeartbeatResult) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Heartbeats asked for within one turn of the event loop (joins, heartbeat frames) go to the
 * engine together: one heartbeatMany, so Redis is paid per batch when many sockets ask at once.
 * One batch is under way at a time: what is asked for while it is gathers for the next, sent at the
 * end of the turn it settles in, so that under load batches grow with the load instead of the calls (a
 * process answering 20,000 frames a second made a call per bucket every turn). Each settles with
 * its own entry's outcome: a bucket's failed call fails its entries alone. Entries must be valid
 * (a bad one would fail its whole batch): callers check them first.
 */
export class TurnBatch {
  private pending: Pending[] = [];
  private sending = false;

  constructor(private readonly rollcall: Rollcall) {}

  add(heartbeat: Heartbeat): Promise<HeartbeatResult> {
    if (this.pending.length === 0 && !this.sending) setImmediate(() => void this.flush());
    return new Promise((resolve, reject) => this.pending.push({ heartbeat, resolve, reject }));
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    this.sending = true;
    try {
      const outcomes = await this.rollcall.heartbeatMany(batch.map((b) => b.heartbeat));
      batch.forEach((b, i) => {
        const outcome = outcomes[i]!;
        if (outcome.error) b.reject(outcome.error);
        else b.resolve(outcome);
      });
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      for (const b of batch) b.reject(failure);
    } finally {
      this.sending = false;
      // At the end of the turn, with whatever else its sockets asked for in it.
      if (this.pending.length > 0) setImmediate(() => void this.flush());
    }
  }
}

/** The errors of a batch's failed entries, each once: one per call that failed. */
export function failures(outcomes: readonly HeartbeatOutcome[]): RollcallError[] {
  return [...new Set(outcomes.flatMap((outcome) => outcome.error ?? []))];
}

/** A server's heartbeat interval option, checked: by default a third of the presence window. */
export function heartbeatInterval(rollcall: Rollcall, ms: number | undefined): number {
  const window = rollcall.settings.presenceWindowMs;
  return integer("heartbeatMs", ms ?? Math.floor(window / 3), 100, window - 1);
}
