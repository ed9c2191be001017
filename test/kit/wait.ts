import { setTimeout as sleep } from "node:timers/promises";

/**
 * A wait of a fixed duration, for the chaos run's pacing and holds only. Tests wait on conditions
 * (`eventually`), and move time rather than wait for it (./clock.ts, fake timers).
 */
export { sleep };

/**
 * Waits until a check passes, polling (5 ms at first, less often the longer it takes). A check
 * that throws (a failed assertion) counts as not yet: on time-out that last error is thrown,
 * its message prefixed with what was awaited, so an assertion's diff still shows.
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  ms = 5_000,
  what = "a condition",
): Promise<void> {
  const until = performance.now() + ms; // not Date.now(): a test may fake Date
  let last: unknown;
  for (let pollMs = 5; ; pollMs = Math.min(100, pollMs * 2)) {
    try {
      if (await check()) return;
      last = undefined;
    } catch (error) {
      last = error;
    }
    if (performance.now() > until) {
      if (!(last instanceof Error)) throw new Error(`timed out waiting for ${what}`);
      last.message = `timed out waiting for ${what}: ${last.message}`;
      throw last;
    }
    await sleep(pollMs);
  }
}

/** Counts unhandled rejections while a test runs (mocha would also fail the run on one). */
export function watchUnhandled(): { count: () => number; stop: () => void } {
  let count = 0;
  const listener = () => (count += 1);
  process.on("unhandledRejection", listener);
  return { count: () => count, stop: () => process.off("unhandledRejection", listener) };
}
