/**
 * What a chaos runner watches a run with, in its own process: a log consumer (when the log is
 * on), a subscriber of every room, and a RoomWatch (a replica) of every room on a subscriber of
 * its own. Nothing they suffer is thrown: errors are counted by code.
 */
import {
  checkEvent,
  LogConsumer,
  RollcallError,
  Subscriber,
  type PresenceEvent,
  type Rollcall,
  type RoomWatch,
} from "../../src/index.js";
import type { Logged } from "../kit/audit.js";
import { eventually } from "../kit/wait.js";

/** Counts by key (an error code, an operation and its code), printed largest first. */
export class Tally {
  readonly counts = new Map<string, number>();

  add(key: string, n = 1): void {
    if (n > 0) this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }

  addAll(counts: Readonly<Record<string, number>>): void {
    for (const [key, n] of Object.entries(counts)) this.add(key, n);
  }

  get total(): number {
    return [...this.counts.values()].reduce((a, b) => a + b, 0);
  }

  /** Keys not among `allowed`. */
  others(allowed: readonly string[]): string[] {
    return [...this.counts.keys()].filter((key) => !allowed.includes(key));
  }

  toString(): string {
    const entries = [...this.counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    return entries.length === 0 ? "0" : entries.map(([key, n]) => `${key} ${n}`).join(", ");
  }
}

/** The code of what a call or a background part failed with. */
export function codeOf(error: unknown): string {
  return error instanceof RollcallError ? error.code : "other";
}

/** Polls until `check` gives null; otherwise its last word after `ms`. */
export async function until(
  check: () => Promise<string | null>,
  ms: number,
): Promise<string | null> {
  const done = async () => {
    const word = await check();
    if (word !== null) throw new Error(word);
    return true;
  };
  return eventually(done, ms).then(
    () => null,
    (error: unknown) => String(error),
  );
}

/** A roster's members as a replica keeps them (user and join time), to compare the two. */
export function membersOf(roster: { members: readonly { user: string; joinedAt: number }[] }) {
  return roster.members.map((m) => `${m.user}@${m.joinedAt}`).join(",");
}

export class Observers {
  /** Every entry the log consumer handled, in the order it handled them. */
  readonly handled: Logged[] = [];
  /** What the subscriber received, in order. */
  readonly pubsub: PresenceEvent[] = [];
  /** What the buckets' logs held at the last drained() check, each bucket in stream order. */
  stored: Logged[] = [];
  readonly watches = new Map<string, RoomWatch>();
  /** The watches' snapshots and log recoveries, by reason (SyncReason). */
  readonly resyncs = new Tally();
  /** What the consumer, the subscriber and the watches reported, by code. */
  readonly errors = new Tally();
  private readonly consumer: LogConsumer | null;
  private readonly subscriber: Subscriber;
  private readonly watcher: Subscriber;

  /** Three instances of the deployment: the consumer's, the subscriber's, the watches'. */
  constructor(
    consumed: Rollcall,
    subscribed: Rollcall,
    watched: Rollcall,
    private readonly rooms: readonly string[],
  ) {
    const count = (error: Error) => this.errors.add(codeOf(error));
    this.consumer =
      consumed.settings.logLength === 0
        ? null
        : new LogConsumer(
            consumed,
            (event, { bucket, id }) => void this.handled.push({ bucket, id, event }),
            { group: "audit", consumer: "runner", pollMs: 20, claimIdleMs: 1_000 },
          );
    this.consumer?.on("error", count);
    this.subscriber = new Subscriber(subscribed);
    this.subscriber.on("error", count);
    this.watcher = new Subscriber(watched);
    this.watcher.on("error", count);
  }

  async start(): Promise<void> {
    this.consumer?.start();
    for (const room of this.rooms) {
      await this.subscriber.subscribe(room, (e) => void this.pubsub.push(e));
    }
    for (const room of this.rooms) {
      const watch = await this.watcher.watch(room);
      watch.on("sync", (reason) => this.resyncs.add(reason));
      this.watches.set(room, watch);
    }
  }

  /** Null once the consumer has handled every entry the logs hold (at once when the log is off). */
  async drained(rc: Rollcall): Promise<string | null> {
    if (!this.consumer) return null;
    this.stored = await storedLog(rc);
    const ids = new Set(this.handled.map((l) => `${l.bucket}/${l.id}`));
    const unread = this.stored.filter((l) => !ids.has(`${l.bucket}/${l.id}`)).length;
    return unread === 0 ? null : `${unread} log entries never handled`;
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    await Promise.all([...this.watches.values()].map((w) => w.close()));
    this.subscriber.close();
    this.watcher.close();
  }
}

/** Null once every room is empty by roster(): no member, no typist. */
export async function quiet(rc: Rollcall, rooms: readonly string[]): Promise<string | null> {
  for (const room of rooms) {
    const roster = await rc.roster(room);
    if (roster.count > 0 || roster.typing.length > 0) return `${room}: ${roster.count} members`;
  }
  return null;
}

/** Null once every watch is synced and lists what roster() lists. */
export async function converged(
  rc: Rollcall,
  watches: ReadonlyMap<string, RoomWatch>,
): Promise<string | null> {
  for (const [room, watch] of watches) {
    const roster = await rc.roster(room);
    const members = membersOf(watch.roster);
    const same =
      members === membersOf(roster) && watch.roster.typing.join() === roster.typing.join();
    if (!watch.synced || !same) {
      return `the watch of ${room} (${watch.synced ? "synced" : "not synced"}) lists ${members} at ${watch.roster.epoch}/${watch.roster.seq}; roster() at ${roster.epoch}/${roster.seq}`;
    }
  }
  return null;
}

/** What the buckets' logs hold, each bucket in stream order. */
async function storedLog(rc: Rollcall): Promise<Logged[]> {
  const stored: Logged[] = [];
  for (let bucket = 0; bucket < rc.settings.buckets; bucket++) {
    for (const [id, fields] of await rc.redis.xrange(rc.layout.log(bucket), "-", "+")) {
      stored.push({ bucket, id, event: checkEvent(JSON.parse(fields[1]!)) });
    }
  }
  return stored;
}
