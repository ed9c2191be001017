import { EventEmitter } from "node:events";
import type { Rollcall } from "../engine/rollcall.js";
import type { SweepCounts } from "../engine/scripts/sweepRoom.js";
import { backoff } from "../protocol/backoff.js";
import { RedisCallError, RollcallError } from "../protocol/errors.js";
import { integer, knownKeys } from "../protocol/options.js";
import { Pause } from "./background.js";

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
  private readonly maxBackoffMs: number;
  private running: Promise<void> | undefined;
  private readonly pause = new Pause();
  private stopping = false;

  constructor(
    private readonly rollcall: Rollcall,
    options?: SweeperOptions,
  ) {
    super();
    const o = knownKeys(options, ["intervalMs", "batch", "maxBackoffMs"]);
    this.intervalMs = integer("intervalMs", o.intervalMs ?? 1_000, 1, 3_600_000);
    this.batch = integer("batch", o.batch ?? 16, 1, 10_000);
    this.maxBackoffMs = integer("maxBackoffMs", o.maxBackoffMs ?? 30_000, 1, 3_600_000);
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
    this.pause.interrupt();
    await this.running;
    this.running = undefined;
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
    const sweepBucket = async (bucket: number) => {
      let rooms: string[];
      do {
        const due = await this.rollcall.dueRooms(bucket, ROOMS_PER_CALL);
        rooms = due.rooms;
        stats.lagMs = Math.max(stats.lagMs, due.lagMs);
        stats.calls += 1;
        stats.rooms += rooms.length;
        const swept = await Promise.all(
          rooms.map((room) => this.rollcall.sweepRoom(room, { batch: this.batch })),
        );
        for (const counts of swept) {
          stats.calls += counts.calls;
          stats.connections += counts.connections;
          stats.leaves += counts.leaves;
          stats.typingStops += counts.typingStops;
        }
      } while (rooms.length === ROOMS_PER_CALL && !this.stopping);
    };
    // allSettled, not all: a failing bucket must not leave the others' loops running after the pass.
    const buckets = await Promise.allSettled(
      Array.from({ length: this.rollcall.settings.buckets }, (_, bucket) => sweepBucket(bucket)),
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
        outcome = error as RollcallError; // sweepOnce throws nothing else
      }
      const pause =
        failures === 0
          ? this.intervalMs
          : backoff(failures + 1, { firstMs: this.intervalMs, maxMs: this.maxBackoffMs });
      this.report(outcome, pause);
      if (!this.stopping) await this.pause.wait(pause);
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
