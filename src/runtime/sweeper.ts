import { EventEmitter } from "node:events";
import type { Rollcall } from "../engine/rollcall.js";
import type { SweepCounts } from "../engine/scripts/sweepRoom.js";
import { RedisCallError, RollcallError } from "../protocol/errors.js";
import { integer, knownKeys } from "../protocol/options.js";
import { Loop } from "./background.js";

export interface SweeperOptions {
  /** Pause between passes. Default 1 000 ms: a typist stops within typing window + 1 s. */
  intervalMs?: number;
  /** Most members one script call expires, so Redis is never blocked for long. Default 16. */
  batch?: number;
  /** Longest pause after repeated failures (the pause doubles from intervalMs). Default 30 000. */
  maxBackoffMs?: number;
}

/** What one pass over every bucket did. */
export interface PassStats extends SweepCounts {
  /** Script calls made: one per bucket to list its due rooms, more for each due room. */
  calls: number;
  /** Rooms that had something due. */
  rooms: number;
  /** How long the longest overdue room had been due when the pass found it: the sweep's lag. */
  lagMs: number;
  durationMs: number;
}

interface SweeperEvents {
  pass: [PassStats];
  /**
   * A pass failed; the sweeper pauses and tries again. REDIS_UNAVAILABLE is an outage that
   * passes; SCRIPT_ERROR is a bug, also reported with process.emitWarning.
   */
  failed: [error: RollcallError, retryInMs: number];
}

/** Rooms one listing call returns; each is then swept by its own call. */
const ROOMS_PER_CALL = 64;

/**
 * Finds and announces every expiry across all rooms. Run one per server instance: each room is
 * settled atomically by its script, so any number of sweepers announce each leave once.
 */
export class Sweeper extends EventEmitter<SweeperEvents> {
  private readonly intervalMs: number;
  private readonly batch: number;
  private readonly loop: Loop;

  constructor(
    private readonly rollcall: Rollcall,
    options?: SweeperOptions,
  ) {
    super();
    const o = knownKeys(options, ["intervalMs", "batch", "maxBackoffMs"]);
    this.intervalMs = integer("intervalMs", o.intervalMs ?? 1_000, 1, 3_600_000);
    this.batch = integer("batch", o.batch ?? 16, 1, 10_000);
    const maxMs = integer("maxBackoffMs", o.maxBackoffMs ?? 30_000, 1, 3_600_000);
    this.loop = new Loop(
      async () => {
        this.report(await this.sweepOnce(), this.intervalMs);
        return this.intervalMs;
      },
      (error, retryInMs) => this.report(error as RollcallError, retryInMs), // sweepOnce throws nothing else
      { firstMs: 2 * this.intervalMs, maxMs },
    );
  }

  /** Sweeps in the background, pausing intervalMs after each pass, until stop(). */
  start(): void {
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
    };
    // A room that fails (a record no script can read) must not keep the others from being swept:
    // every due room is tried, and the pass reports the first failure at its end.
    const failures: unknown[] = [];
    const sweepBucket = async (bucket: number) => {
      let rooms: string[];
      let progress: boolean;
      do {
        const due = await this.rollcall.dueRooms(bucket, ROOMS_PER_CALL);
        rooms = due.rooms;
        stats.lagMs = Math.max(stats.lagMs, due.lagMs);
        stats.calls += 1;
        stats.rooms += rooms.length;
        const swept = await Promise.allSettled(
          rooms.map((room) => this.rollcall.sweepRoom(room, { batch: this.batch })),
        );
        progress = false;
        for (const result of swept) {
          if (result.status === "rejected") {
            failures.push(result.reason);
            continue;
          }
          progress = true;
          stats.calls += result.value.calls;
          stats.connections += result.value.connections;
          stats.leaves += result.value.leaves;
          stats.typingStops += result.value.typingStops;
        }
      } while (rooms.length === ROOMS_PER_CALL && progress && !this.loop.stopped);
    };
    // allSettled, not all: a failing bucket must not leave the others' loops running after the pass.
    const buckets = await Promise.allSettled(
      Array.from({ length: this.rollcall.settings.buckets }, (_, bucket) => sweepBucket(bucket)),
    );
    for (const b of buckets) if (b.status === "rejected") failures.push(b.reason);
    if (failures.length > 0) throw failures[0];
    stats.durationMs = performance.now() - started;
    return stats;
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
