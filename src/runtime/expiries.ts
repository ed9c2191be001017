/** How often expiries are checked: a socket closes at most about this long after its expiry. */
const TICK_MS = 250;

/**
 * When each socket's identity expires, checked from one timer: a set entry per socket rather than
 * a timer of its own (an idle socket should cost little). Entries are filed by the tick they fall
 * due at.
 */
export class Expiries<T> {
  private readonly due = new Map<number, Set<T>>();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly expire: (entry: T) => void) {
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** Files an entry due at `at` (ms since the epoch); returns where, to remove it by. */
  add(entry: T, at: number): number {
    const slot = Math.ceil(at / TICK_MS);
    let entries = this.due.get(slot);
    if (!entries) this.due.set(slot, (entries = new Set()));
    entries.add(entry);
    return slot;
  }

  remove(entry: T, slot: number): void {
    const entries = this.due.get(slot);
    if (entries?.delete(entry) && entries.size === 0) this.due.delete(slot);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private tick(): void {
    const now = Math.floor(Date.now() / TICK_MS);
    for (const [slot, entries] of this.due) {
      if (slot > now) continue;
      this.due.delete(slot);
      for (const entry of entries) this.expire(entry);
    }
  }
}
