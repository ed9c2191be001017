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
 * Spaces out one room's resyncs: the first at once, then, while they keep coming, doubling pauses
 * from `firstMs` up to `maxMs`, so that messages that keep failing to fit (a corrupt or foreign
 * publisher) cost a snapshot every `maxMs` at most, never a loop. A quiet spell starts it over.
 */
export class ResyncPacer {
  private count = 0;
  private nextAt = -Infinity;

  constructor(
    private readonly firstMs = 100,
    private readonly maxMs = 5_000,
  ) {}

  /** The pause before a resync wanted at `now` (ms, any clock), and counts it. */
  delay(now: number): number {
    if (now - this.nextAt > 2 * this.maxMs) this.count = 0;
    const ms =
      this.count === 0 ? 0 : backoff(this.count, { firstMs: this.firstMs, maxMs: this.maxMs });
    this.count += 1;
    this.nextAt = now + ms;
    return ms;
  }
}
