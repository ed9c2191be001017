import { EventEmitter } from "node:events";
import type { Rollcall } from "../engine/rollcall.js";
import type { SweepCounts } from "../engine/scripts/sweep.js";
import { RedisCallError } from "../engine/errors.js";
import { RollcallError } from "../protocol/errors.js";
import { integer, knownKeys } from "../protocol/options.js";
import { Loop } from "./background.js";

export interface SweeperOptions {
  /** Pause between passes. Default 1 000 ms: a typist stops within typing window + 1 s. */
  intervalMs?: number;
  /** Most members one script call expires, so Redis is never blocked for long. Default 16. */
  batch?: number;
  /** Longest pause after repeated failures (the pause doubles from intervalMs). Default 30 000. */
  maxBackoffMs?: number;
  /**
   * How often it counts every room anew (Rollcall.reconcile), mending the counts after keys
   * expired unannounced or data was lost; 0: never. Default 600 000 (10 min), the first after one
   * interval, with jitter so that many sweepers do not reconcile together.
   */
  reconcileMs?: number;
}

/** What one pass over every bucket did. */
export interface PassStats extends SweepCounts {
  /** Script calls made: one per bucket, more where more was due than one call settles. */
  calls: number;
  /** Rooms that had something due. */
  rooms: number;
  /** How long the longest overdue room had been due when the pass found it: the sweep's lag. */
  lagMs: number;
  durationMs: number;
  /**
   * Users who went online or offline by the user changes this Sweeper applied since its last pass
   * (in the background: see applyUserChanges).
   */
  statusChanges: number;
}

interface SweeperEvents {
  pass: [PassStats];
  /**
   * A pass failed; the sweeper pauses and tries again. REDIS_UNAVAILABLE is an outage that
   * passes; SCRIPT_ERROR is a bug, also reported with process.emitWarning.
   */
  failed: [error: RollcallError, retryInMs: number];
}

/**
 * Finds and announces every expiry across all rooms. Run one per server instance: each room is
 * settled atomically by its script, so any number of sweepers announce each leave once.
 */
export class Sweeper extends EventEmitter<SweeperEvents> {
  private readonly intervalMs: number;
  private readonly batch: number;
  private readonly reconcileMs: number;
  private nextReconcile = 0;
  /** Status transitions made by this Sweeper's drains since its last pass. */
  private statusChanges = 0;
  private readonly loop: Loop;

  constructor(
    private readonly rollcall: Rollcall,
    options?: SweeperOptions,
  ) {
    super();
    const o = knownKeys(options, ["intervalMs", "batch", "maxBackoffMs", "reconcileMs"]);
    this.intervalMs = integer("intervalMs", o.intervalMs ?? 1_000, 1, 3_600_000);
    this.batch = integer("batch", o.batch ?? 16, 1, 10_000);
    const maxMs = integer("maxBackoffMs", o.maxBackoffMs ?? 30_000, 1, 3_600_000);
    this.reconcileMs = integer("reconcileMs", o.reconcileMs ?? 600_000, 0, 86_400_000);
    this.loop = new Loop(
      async () => {
        this.report(await this.sweepOnce(), this.intervalMs);
        await this.reconcileWhenDue();
        return this.intervalMs;
      },
      (error, retryInMs) => this.report(error as RollcallError, retryInMs), // sweepOnce throws nothing else
      { firstMs: 2 * this.intervalMs, maxMs },
    );
  }

  /** Sweeps in the background, pausing intervalMs after each pass, until stop(). */
  start(): void {
    this.nextReconcile = performance.now() + this.reconcileMs * (0.5 + Math.random());
    this.loop.start();
  }

  /** Stops, after the pass in flight (if any) has finished. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: every bucket, each drained of what is due, room by room. */
  async sweepOnce(): Promise<PassStats> {
    try {
      const stats = await this.pass();
      this.record(stats);
      return stats;
    } catch (error) {
      const failure = error instanceof RollcallError ? error : new RedisCallError("sweep", error);
      this.record(failure);
      throw failure;
    }
  }

  private async pass(): Promise<PassStats> {
    const started = performance.now();
    const stats: PassStats = {
      calls: 0,
      rooms: 0,
      lagMs: 0,
      connections: 0,
      leaves: 0,
      typingStops: 0,
      durationMs: 0,
      statusChanges: this.statusChanges,
    };
    this.statusChanges = 0;
    // A bucket that fails (a record no script can read) must not keep the others from being
    // swept: every bucket is tried, and the pass reports the first failure at its end.
    const sweepBucket = async (bucket: number) => {
      let swept;
      let failure: string | null = null;
      do {
        swept = await this.rollcall.sweepBucket(bucket, {
          batch: this.batch,
          everyMs: this.intervalMs,
        });
        stats.calls += 1;
        stats.rooms += swept.rooms;
        stats.lagMs = Math.max(stats.lagMs, swept.lagMs);
        stats.connections += swept.connections;
        stats.leaves += swept.leaves;
        stats.typingStops += swept.typingStops;
        failure ??= swept.failure;
      } while (swept.more && !this.loop.stopped);
      this.applyUserChanges(bucket);
      if (failure !== null)
        throw new RedisCallError(`sweep of bucket ${bucket}`, new Error(failure));
    };
    // allSettled, not all: a failing bucket must not leave the others' loops running after the pass.
    const buckets = await Promise.allSettled(
      Array.from({ length: this.rollcall.settings.buckets }, (_, bucket) => sweepBucket(bucket)),
    );
    const failed = buckets.find((b) => b.status === "rejected");
    if (failed) throw failed.reason;
    stats.durationMs = performance.now() - started;
    return stats;
  }

  /**
   * Applies the bucket's user changes, those of this pass's leaves and those a process that died
   * left unapplied, in the background: the sweeps' rhythm, which tells a stall of Redis (see
   * sweepBucket's everyMs), must not wait for them. One drain per bucket runs at a time (the
   * engine's); one that fails is tried again next pass, and a script failure is reported.
   */
  private applyUserChanges(bucket: number): void {
    this.rollcall.applyUserChanges(bucket).then(
      (made) => (this.statusChanges += made),
      (error: unknown) => {
        if ((error as RollcallError).code === "SCRIPT_ERROR")
          this.report(error as RollcallError, 0);
      },
    );
  }

  /** Counts every room anew once reconcileMs has passed since the last time (0: never). */
  private async reconcileWhenDue(): Promise<void> {
    if (this.reconcileMs === 0 || performance.now() < this.nextReconcile) return;
    this.nextReconcile = performance.now() + this.reconcileMs;
    try {
      await this.rollcall.reconcile();
    } catch (error) {
      const failure =
        error instanceof RollcallError ? error : new RedisCallError("reconcile", error);
      this.report(failure, this.intervalMs);
    }
  }

  private record(outcome: PassStats | RollcallError): void {
    const { metrics } = this.rollcall;
    if (outcome instanceof RollcallError) {
      metrics.add("rollcall.sweep.passes", 1, { outcome: outcome.code });
      return;
    }
    metrics.add("rollcall.sweep.passes", 1, { outcome: "ok" });
    metrics.add("rollcall.sweep.expirations", outcome.connections, { kind: "connection" });
    metrics.add("rollcall.sweep.expirations", outcome.leaves, { kind: "leave" });
    metrics.add("rollcall.sweep.expirations", outcome.typingStops, { kind: "typing-stop" });
    metrics.record("rollcall.sweep.lag", outcome.lagMs);
    metrics.record("rollcall.sweep.duration", outcome.durationMs);
  }

  // A listener that throws must not stop the loop, nor pass for a failed sweep.
  private report(outcome: PassStats | RollcallError, retryInMs: number): void {
    try {
      if (!(outcome instanceof RollcallError)) this.emit("pass", outcome);
      else {
        // A script bug will not go away by waiting: say so even if nobody listens.
        if (outcome.code === "SCRIPT_ERROR") process.emitWarning(outcome);
        this.emit("failed", outcome, retryInMs);
      }
    } catch (error) {
      process.emitWarning(error instanceof Error ? error : String(error));
    }
  }
}

/**
 * The sweeper a server part (the gateway, the Socket.IO integration) runs unless told not to:
 * `option` true or undefined for one with the defaults, its options, or false for none. Its
 * failures go to `report`.
 */
export function ownSweeper(
  rollcall: Rollcall,
  option: boolean | SweeperOptions | undefined,
  report: (error: RollcallError) => void,
): Sweeper | undefined {
  if (option === false) return undefined;
  const sweeper = new Sweeper(rollcall, option === true || option === undefined ? {} : option);
  sweeper.on("failed", (error) => report(error));
  sweeper.start();
  return sweeper;
}
