import { EventEmitter } from "node:events";
import { RollcallError, RedisCallError } from "./errors.js";
import { integer, knownKeys } from "./options.js";
import type { Rollcall, SweepCounts } from "./rollcall.js";
import { int } from "./scripts.js";

export interface SweeperOptions {
  /** Pause between passes. Default 1 000 ms: a typist stops within typing window + 1 s. */
  intervalMs?: number;
  /** Most members one script call settles, so Redis is never blocked for long. Default 16. */
  batch?: number;
  /** Longest pause after repeated failures (the pause doubles from intervalMs). Default 30 000. */
  maxBackoffMs?: number;
}

/** What one pass over every bucket did. */
export interface PassStats extends SweepCounts {
  /** Script calls made (at least one per bucket). */
  calls: number;
  /** Members whose due entry was settled. */
  members: number;
  durationMs: number;
}

interface SweeperEvents {
  pass: [PassStats];
  /** A pass failed (Redis unreachable, …); the sweeper backs off and tries again. */
  failed: [error: RollcallError, retryInMs: number];
}

/**
 * Finds and announces every expiry across all rooms. Run one per server instance: the sweep
 * script settles each due entry atomically, so any number of sweepers announce each leave once.
 */
export class Sweeper extends EventEmitter<SweeperEvents> {
  private readonly intervalMs: number;
  private readonly batch: number;
  private readonly maxBackoffMs: number;
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private stopping = false;

  constructor(
    private readonly rollcall: Rollcall,
    options: SweeperOptions = {},
  ) {
    super();
    knownKeys(options, ["intervalMs", "batch", "maxBackoffMs"]);
    this.intervalMs = integer("intervalMs", options.intervalMs ?? 1_000, 1, 3_600_000);
    this.batch = integer("batch", options.batch ?? 16, 1, 10_000);
    this.maxBackoffMs = integer("maxBackoffMs", options.maxBackoffMs ?? 30_000, 1, 3_600_000);
  }

  /** Sweeps in the background, pausing intervalMs after each pass, until stop(). */
  start(): void {
    if (this.running) return;
    this.stopping = false;
    this.running = this.loop();
  }

  /** Stops, after the pass in flight (if any) has finished. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.running;
    this.running = undefined;
  }

  /** One pass: every bucket, each drained batch by batch of what is due. */
  async sweepOnce(): Promise<PassStats> {
    const started = performance.now();
    const stats: PassStats = {
      calls: 0,
      members: 0,
      connections: 0,
      leaves: 0,
      typingStops: 0,
      durationMs: 0,
    };
    // allSettled, not all: a failing bucket must not leave the others' loops running after the pass.
    const buckets = await Promise.allSettled(
      this.rollcall.layout.buckets.map(async ({ bucket }) => {
        let more = true;
        while (more) {
          const reply = await this.rollcall.runInBucket("sweep", bucket, [this.batch]);
          stats.calls += 1;
          stats.members += int(reply, 0);
          stats.connections += int(reply, 1);
          stats.leaves += int(reply, 2);
          stats.typingStops += int(reply, 3);
          more = int(reply, 4) === 1;
        }
      }),
    );
    const failure = buckets.find((b) => b.status === "rejected");
    if (failure) throw failure.reason;
    stats.durationMs = performance.now() - started;
    return stats;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let outcome: PassStats | RollcallError;
      try {
        outcome = await this.sweepOnce();
        failures = 0;
      } catch (error) {
        failures += 1;
        outcome = error instanceof RollcallError ? error : new RedisCallError("sweep", error);
      }
      this.report(outcome, this.pauseAfter(failures));
      await this.pause(this.pauseAfter(failures));
    }
  }

  // A listener that throws must not stop the loop, nor pass for a failed sweep.
  private report(outcome: PassStats | RollcallError, retryInMs: number): void {
    try {
      if (outcome instanceof RollcallError) this.emit("failed", outcome, retryInMs);
      else this.emit("pass", outcome);
    } catch (error) {
      process.emitWarning(error instanceof Error ? error : String(error));
    }
  }

  private pauseAfter(failures: number): number {
    return Math.min(this.intervalMs * 2 ** failures, Math.max(this.maxBackoffMs, this.intervalMs));
  }

  private pause(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
