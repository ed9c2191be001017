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
