import { UnexpectedReplyError } from "../protocol/errors.js";
import type { UserStatus } from "../protocol/users.js";
import { RedisCallError } from "./errors.js";
import type { Layout } from "./layout.js";
import type { Client } from "./script.js";

/** The statuses of some users of one bucket, consistent with the bucket's users channel at `seq`. */
export interface StatusSnapshot {
  /** The sequence space of `seq` ('' before the bucket's first event of any kind). */
  epoch: string;
  /** The last status change the bucket published (0: none yet). */
  seq: number;
  statuses: UserStatus[];
}

/** Most users one status() call reads. */
export const STATUS_LIMIT = 500;
/** Most user changes one users script call applies. */
export const CHANGES_PER_CALL = 256;

const STATUS = /^(\d+):(\d+):(\d+):\d+$/;

/** A user's status as lua/users-3.lua stores it ('<rooms>:<since>:<lastSeen>:<ended>'). */
export function decodeStatus(user: string, raw: unknown): UserStatus {
  if (raw === null || raw === undefined) {
    return { user, online: false, since: null, lastSeenAt: null };
  }
  const match = typeof raw === "string" ? STATUS.exec(raw) : null;
  if (!match) throw new UnexpectedReplyError(`status of ${user}`, raw);
  const [rooms, since, last] = [Number(match[1]), Number(match[2]), Number(match[3])];
  return {
    user,
    online: rooms > 0,
    since: rooms > 0 ? since : null,
    lastSeenAt: last > 0 ? last : null,
  };
}

/**
 * The statuses of users, in the order given: one MGET on a single Redis; on a Cluster, one per
 * bucket the users fall in (a bucket's keys share a slot), in parallel.
 */
export async function readStatuses(
  client: Client,
  layout: Layout,
  users: readonly string[],
): Promise<UserStatus[]> {
  const keys = users.map((user) => layout.userStatus(user));
  const raws = new Array<unknown>(users.length);
  try {
    if (!client.isCluster) {
      (await client.mget(...keys)).forEach((raw, i) => (raws[i] = raw));
    } else {
      const byBucket = new Map<number, number[]>();
      users.forEach((user, i) => {
        const bucket = layout.userBucket(user);
        byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), i]);
      });
      await Promise.all(
        [...byBucket.values()].map(async (at) => {
          const found = await client.mget(...at.map((i) => keys[i]!));
          at.forEach((i, k) => (raws[i] = found[k]));
        }),
      );
    }
  } catch (error) {
    throw new RedisCallError("status", error);
  }
  return users.map((user, i) => decodeStatus(user, raws[i]));
}

/**
 * Users of one bucket, read in one MULTI with the bucket's epoch and its last status change: a
 * snapshot that a follower of the bucket's users channel applies the later changes to.
 */
export async function readSnapshot(
  client: Client,
  layout: Layout,
  bucket: number,
  users: readonly string[],
): Promise<StatusSnapshot> {
  let replies: [Error | null, unknown][] | null;
  try {
    const multi = client.multi().hmget(layout.seq(bucket), "epoch", "u");
    if (users.length > 0) multi.mget(...users.map((user) => layout.userStatus(user)));
    replies = await multi.exec();
  } catch (error) {
    throw new RedisCallError("status snapshot", error);
  }
  const failed = replies?.find(([error]) => error)?.[0];
  if (!replies || failed)
    throw new RedisCallError("status snapshot", failed ?? new Error("aborted"));
  const [epoch, seq] = replies[0]![1] as (string | null)[];
  const raws = users.length > 0 ? (replies[1]![1] as unknown[]) : [];
  return {
    epoch: epoch ?? "",
    seq: Number(seq ?? 0),
    statuses: users.map((user, i) => decodeStatus(user, raws[i])),
  };
}

/** One pending user change, as a room bucket's scripts write it to its stream (lua/users-3.lua). */
export interface UserChange {
  /** The stream entry's id. */
  readonly id: string;
  readonly user: string;
  /** The change as the users script takes it. */
  readonly change: string;
}

/** The stream entries' changes, in the stream's order. */
export function parseChanges(entries: [id: string, fields: string[]][]): UserChange[] {
  return entries.map(([id, fields]) => {
    const change = fields?.[1];
    const user = change?.split("\n")[4];
    if (!change || !user) throw new UnexpectedReplyError("user change", fields);
    return { id, user, change };
  });
}

/** The least stream id after `id`: XTRIM MINID of it drops `id` and everything before. */
export function idAfter(id: string): string {
  const [ms, seq] = id.split("-");
  return `${ms}-${BigInt(seq ?? 0) + 1n}`;
}

/**
 * Drains the user changes of room buckets into the users' status, one drain per bucket at a
 * time: a drain asked for while one runs makes that one go round again, and resolves with it,
 * so that a caller's own change is applied when its drain resolves. Concurrent drainers on other
 * instances are harmless: the users script applies each change once (lua/users-3.lua).
 */
export class UserChangeDrain {
  private readonly running = new Map<number, Promise<number>>();
  private readonly again = new Set<number>();

  constructor(
    private readonly client: Client,
    private readonly layout: Layout,
    /** Runs the users script on a user bucket with changes of its users: transitions made. */
    private readonly apply: (userBucket: number, changes: string[]) => Promise<number>,
  ) {}

  /** Applies the bucket's pending changes; resolves to the status transitions they made. */
  drain(bucket: number): Promise<number> {
    const running = this.running.get(bucket);
    if (running) {
      this.again.add(bucket);
      return running;
    }
    const drained = (async () => {
      // Started on the next turn of the event loop: the joins and leaves whose replies came in
      // this one (a burst, a batch's calls) share a drain, and a script call.
      await new Promise((resolve) => setImmediate(resolve));
      let transitions = 0;
      do {
        this.again.delete(bucket);
        transitions += await this.drainOnce(bucket);
      } while (this.again.has(bucket));
      return transitions;
    })().finally(() => this.running.delete(bucket));
    this.running.set(bucket, drained);
    return drained;
  }

  private async drainOnce(bucket: number): Promise<number> {
    const key = this.layout.userChanges(bucket);
    let transitions = 0;
    for (;;) {
      let entries: [string, string[]][];
      try {
        entries = await this.client.xrange(key, "-", "+", "COUNT", CHANGES_PER_CALL);
      } catch (error) {
        throw new RedisCallError("user changes", error);
      }
      if (entries.length === 0) return transitions;
      const changes = parseChanges(entries);
      const byBucket = new Map<number, string[]>();
      for (const { user, change } of changes) {
        const userBucket = this.layout.userBucket(user);
        byBucket.set(userBucket, [...(byBucket.get(userBucket) ?? []), change]);
      }
      // Each user's changes stay in the stream's order: they are all in their bucket's call.
      const made = await Promise.all([...byBucket].map(([b, list]) => this.apply(b, list)));
      transitions += made.reduce((a, b) => a + b, 0);
      try {
        await this.client.xtrim(key, "MINID", idAfter(changes.at(-1)!.id));
      } catch (error) {
        throw new RedisCallError("user changes", error);
      }
      if (entries.length < CHANGES_PER_CALL) return transitions;
    }
  }
}
