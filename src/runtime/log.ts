import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import type { LogGroup, LogRecord } from "../engine/eventLog.js";
import { isGroupLost } from "../engine/eventLog.js";
import { parseLogged, type Rollcall } from "../engine/rollcall.js";
import { RedisCallError } from "../engine/errors.js";
import { RollcallError } from "../protocol/errors.js";
import type { PresenceEvent } from "../protocol/events.js";
import { Loop, reportError } from "./background.js";
import { callback, integer, invalidOption, knownKeys } from "../protocol/options.js";

/** Where an event sits in its bucket's log. */
export interface LogEntry {
  readonly bucket: number;
  /** The stream entry id. */
  readonly id: string;
}

export type LogHandler = (event: PresenceEvent, entry: LogEntry) => void | Promise<void>;

export interface LogConsumerOptions {
  /** The consumer group: instances of one group share the events, each processed by one. */
  group: string;
  /** This consumer's name within the group; keep it across restarts to resume its pending events. Default host-pid. */
  consumer?: string;
  /** Where a new group starts: "start" (everything the log holds) or "end" (new events). Default "start". */
  from?: "start" | "end";
  /** Entries read per bucket per call. Default 100. */
  batch?: number;
  /** Pause when a pass found nothing. Default 100 ms. */
  pollMs?: number;
  /** Pending entries idle this long (their consumer died, or failed them) are claimed. Default 30 000 ms. */
  claimIdleMs?: number;
  /** A handler failing an event this many times in this process gives it up (reported, acknowledged). Default 5. */
  maxAttempts?: number;
}

interface LogConsumerEvents {
  /** A read failed (Redis unreachable), a handler threw, or an event was given up. Never thrown. */
  error: [error: Error];
  /** Entries that were trimmed from the log before this group processed them: lost for it. */
  trimmed: [entry: LogEntry];
}

const NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Reads the durable event log (a stream per bucket, written by the same script that publishes,
 * so an event is in it if and only if its change happened) with a consumer group: several
 * instances share the work, each event is acknowledged once its handler resolved, a restarted
 * consumer first finishes its own pending events, and those of a dead one are claimed
 * (XAUTOCLAIM). Delivery is at least once: a handler sees an event again if it crashed before
 * the acknowledgement, so make it idempotent by (epoch, seq) or by entry id.
 */
export class LogConsumer extends EventEmitter<LogConsumerEvents> {
  readonly group: string;
  readonly consumer: string;
  private readonly handler: LogHandler;
  private readonly from: "start" | "end";
  private readonly batch: number;
  private readonly pollMs: number;
  private readonly claimIdleMs: number;
  private readonly maxAttempts: number;
  private readonly log: LogGroup;
  private readonly attempts = new Map<string, number>();
  /** Buckets whose group exists, and whose own pending entries were read since the start. */
  private readonly ready = new Set<number>();
  private readonly recovered = new Set<number>();
  /** Buckets whose stream and group vanished since this consumer started (data lost). */
  private readonly lost = new Set<number>();
  private readonly loop: Loop;

  constructor(
    readonly rollcall: Rollcall,
    handler: LogHandler,
    options: LogConsumerOptions,
  ) {
    super();
    if (rollcall.settings.logLength === 0) invalidOption("the log is off: set logLength to use it");
    this.handler = callback<LogHandler>("handler", handler)!;
    if (!this.handler) invalidOption("a handler is required");
    const o = knownKeys(options, [
      "group",
      "consumer",
      "from",
      "batch",
      "pollMs",
      "claimIdleMs",
      "maxAttempts",
    ]);
    if (typeof o.group !== "string" || !NAME.test(o.group))
      invalidOption(`group must match ${NAME}`);
    this.group = o.group;
    this.consumer = o.consumer ?? `${hostname()}-${process.pid}`;
    if (!NAME.test(this.consumer)) invalidOption(`consumer must match ${NAME}`);
    if (o.from !== undefined && o.from !== "start" && o.from !== "end") {
      invalidOption('from must be "start" or "end"');
    }
    this.from = o.from ?? "start";
    this.batch = integer("batch", o.batch ?? 100, 1, 10_000);
    this.pollMs = integer("pollMs", o.pollMs ?? 100, 1, 60_000);
    this.claimIdleMs = integer("claimIdleMs", o.claimIdleMs ?? 30_000, 1, 86_400_000);
    this.maxAttempts = integer("maxAttempts", o.maxAttempts ?? 5, 1, 1_000);
    // Its own connection: the user's client must never wait behind these reads.
    this.log = rollcall.logGroup(this.group, this.consumer, (error) => this.report(error));
    this.loop = new Loop(
      async () => ((await this.consumeOnce()) > 0 ? 0 : this.pollMs),
      (error) =>
        this.report(error instanceof RollcallError ? error : new RedisCallError("log", error)),
      { firstMs: this.pollMs, maxMs: 5_000 },
    );
  }

  /** Reads and handles in the background until stop(). */
  start(): void {
    this.loop.start();
  }

  /** Stops after the pass in flight (its handled events acknowledged) and closes the connection. */
  async stop(): Promise<void> {
    await this.loop.stop();
    this.log.close();
  }

  /**
   * One pass over every bucket: this consumer's own pending entries first (after a restart),
   * then new ones, then those idle too long in the group. Resolves to the events handled.
   */
  async consumeOnce(): Promise<number> {
    const counts = await Promise.all(
      Array.from({ length: this.rollcall.settings.buckets }, (_, b) => this.consumeBucket(b)),
    );
    return counts.reduce((a, b) => a + b, 0);
  }

  private async consumeBucket(bucket: number): Promise<number> {
    if (!this.ready.has(bucket)) {
      await this.log.create(
        bucket,
        this.from === "end" && !this.lost.has(bucket) ? "end" : "start",
      );
      this.ready.add(bucket);
    }
    try {
      let handled = 0;
      // After a restart, this consumer's own pending entries come first: delivered, not done.
      if (!this.recovered.has(bucket)) {
        handled += await this.handle(bucket, await this.log.read(bucket, "pending", this.batch));
        this.recovered.add(bucket);
      }
      handled += await this.handle(bucket, await this.log.read(bucket, "new", this.batch));
      const claimed = await this.log.claim(bucket, this.claimIdleMs, this.batch);
      for (const id of claimed.deleted) this.tell("trimmed", { bucket, id });
      return handled + (await this.handle(bucket, claimed.records));
    } catch (error) {
      if (!isGroupLost(error)) throw error;
      // The stream and its group are gone (Redis lost its data): the next pass makes them again,
      // from the stream's start, since all it will hold came after the loss.
      this.ready.delete(bucket);
      this.recovered.delete(bucket);
      this.lost.add(bucket);
      return 0;
    }
  }

  private async handle(bucket: number, entries: LogRecord[]): Promise<number> {
    const done: string[] = [];
    const count = (outcome: string) =>
      this.rollcall.metrics.add("rollcall.log.entries", 1, { group: this.group, outcome });
    for (const { id, json } of entries) {
      // A pending entry whose data was trimmed comes back with no fields: it can only be let go.
      if (json === null) {
        this.tell("trimmed", { bucket, id });
        done.push(id);
        continue;
      }
      try {
        await this.handler(parseLogged(json), { bucket, id });
        done.push(id);
        this.attempts.delete(id);
        count("ok");
      } catch (error) {
        count("failed");
        const attempts = (this.attempts.get(id) ?? 0) + 1;
        this.attempts.set(id, attempts);
        this.report(error instanceof Error ? error : new Error(String(error)));
        if (attempts >= this.maxAttempts) {
          this.report(
            new Error(`log entry ${id} of bucket ${bucket} given up after ${attempts} attempts`),
          );
          this.attempts.delete(id);
          done.push(id);
          count("given-up");
        }
      }
    }
    await this.log.ack(bucket, done);
    return done.length;
  }

  private tell(name: "trimmed", entry: LogEntry): void {
    this.rollcall.metrics.add("rollcall.log.entries", 1, { group: this.group, outcome: "trimmed" });
    try {
      this.emit(name, entry);
    } catch (error) {
      this.report(error);
    }
  }

  private report(error: unknown): void {
    reportError(this, error);
  }
}
