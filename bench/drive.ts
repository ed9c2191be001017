/** Calls `work` for every item, at most `inFlight` at a time: fast set-up without a flood. */
export async function forEachInFlight<T>(
  items: readonly T[],
  inFlight: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, items.length) }, worker));
}

/**
 * Keeps `inFlight` operations outstanding, each starting as soon as one ends, until `ms` have
 * passed; `op` gets a running counter so callers can walk their population. Returns the number
 * of operations completed.
 */
export async function keepBusy(
  inFlight: number,
  ms: number,
  op: (n: number) => Promise<unknown>,
): Promise<number> {
  const deadline = performance.now() + ms;
  let started = 0;
  const worker = async () => {
    while (performance.now() < deadline) await op(started++);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return started;
}
