/**
 * The pause before retry number `failures` (1, 2, …): doubling from `firstMs` up to `maxMs`.
 * With `jitter`, a random share of it (full jitter above half), so that many clients that failed
 * together do not come back together.
 */
export function backoff(
  failures: number,
  { firstMs, maxMs, jitter = false }: { firstMs: number; maxMs: number; jitter?: boolean },
): number {
  const ms = Math.min(firstMs * 2 ** Math.max(0, failures - 1), Math.max(maxMs, firstMs));
  return jitter ? ms / 2 + Math.random() * (ms / 2) : ms;
}

/**
 * Spaces out one room's resyncs: the first at once, then, while they keep coming, at least an
 * interval apart that doubles from `firstMs` up to `maxMs`, so that messages that keep failing to
 * fit (a corrupt or foreign publisher) cost a snapshot every `maxMs` at most, never a loop. After
 * `maxMs` without one, the next is at once again.
 */
export class ResyncPacer {
  private interval = 0;
  private lastAt = -Infinity;

  constructor(
    private readonly firstMs = 100,
    private readonly maxMs = 2_000,
  ) {}

  /** The pause before a resync wanted at `now` (ms, any clock), and counts it. */
  delay(now: number): number {
    if (now - this.lastAt >= this.maxMs) this.interval = 0;
    const at = Math.max(now, this.lastAt + this.interval);
    this.interval = this.interval === 0 ? this.firstMs : Math.min(2 * this.interval, this.maxMs);
    this.lastAt = at;
    return at - now;
  }
}
