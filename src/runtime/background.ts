import type { EventEmitter } from "node:events";
import { backoff } from "../protocol/backoff.js";

/**
 * Hands an error to an emitter's 'error' listeners, or to process.emitWarning when it has none:
 * an 'error' event nobody listens to would throw and take the host process down. A listener
 * that throws is a warning too, never an exception in the caller.
 */
export function reportError(emitter: EventEmitter, error: unknown): void {
  const reported = error instanceof Error ? error : new Error(String(error));
  if (emitter.listenerCount("error") === 0) return process.emitWarning(reported);
  try {
    emitter.emit("error", reported);
  } catch (thrown) {
    process.emitWarning(thrown instanceof Error ? thrown : new Error(String(thrown)));
  }
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

/**
 * A background loop: one round after another until stop(), which waits for the round in flight.
 * A round resolves to the pause before the next one; a round that fails is handed to `failed`
 * with the pause before the next try, doubling from `firstMs` up to `maxMs`.
 */
export class Loop {
  private running: Promise<void> | undefined;
  private stopping = false;
  private readonly pause = new Pause();

  constructor(
    private readonly round: () => Promise<number>,
    private readonly failed: (error: unknown, retryInMs: number) => void,
    private readonly retry: { firstMs: number; maxMs: number },
  ) {}

  /** stop() was called: a round in flight should finish early. */
  get stopped(): boolean {
    return this.stopping;
  }

  start(): void {
    if (this.running) return;
    this.stopping = false;
    this.running = this.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.pause.interrupt();
    await this.running;
    this.running = undefined;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let pause: number;
      try {
        pause = await this.round();
        failures = 0;
      } catch (error) {
        failures += 1;
        pause = backoff(failures, this.retry);
        this.failed(error, pause);
      }
      if (pause > 0 && !this.stopping) await this.pause.wait(pause);
    }
  }
}
