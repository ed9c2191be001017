import type { EventEmitter } from "node:events";

/**
 * Hands an error to an emitter's 'error' listeners, or to process.emitWarning when it has none:
 * an 'error' event nobody listens to would throw and take the host process down.
 */
export function reportError(emitter: EventEmitter, error: unknown): void {
  const reported = error instanceof Error ? error : new Error(String(error));
  if (emitter.listenerCount("error") > 0) emitter.emit("error", reported);
  else process.emitWarning(reported);
}

/** The pause between rounds of a background loop, which stopping cuts short. */
export class Pause {
  private wake: (() => void) | undefined;

  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  interrupt(): void {
    this.wake?.();
  }
}
