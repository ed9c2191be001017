import { RedisCallError } from "../protocol/errors.js";
import type { Layout } from "./layout.js";
import type { Client } from "./script.js";

/** What one bucket holds. */
export interface BucketStats {
  bucket: number;
  /** Rooms with a member. */
  rooms: number;
  /** Members, those in their leave grace included. */
  users: number;
  connections: number;
  typing: number;
  /** Rooms whose due score has passed (Redis's time): what the sweepers have yet to sweep. */
  backlog: number;
  /** How long the oldest of them has been due, ms, or null when nothing is: the sweepers' lag. */
  lagMs: number | null;
  /** The bucket's event epoch and counter (null and 0 before its first event). */
  epoch: string | null;
  events: number;
}

/** Calls in flight at once, for the rosters and the buckets' own reads. */
const CONCURRENCY = 64;
const SCAN_COUNT = 1_000;

/** A room's counts, as its roster tells them. */
export type RoomCounts = (
  room: string,
) => Promise<{ users: number; connections: number; typing: number }>;

/** Every bucket's counts: the rooms of its due set, each counted through its roster. */
export async function collectStats(
  client: Client,
  layout: Layout,
  countRoom: RoomCounts,
): Promise<BucketStats[]> {
  const buckets = Array.from({ length: layout.buckets }, (_, bucket) => bucket);
  const rooms: { bucket: number; room: string }[] = [];
  const stats = await mapLimit(buckets, async (bucket): Promise<BucketStats> => {
    const due = layout.due(bucket);
    // TIME names no key: in this pipeline it runs on the bucket's own node, next to its scores.
    const [time, count, oldest, counter] = await pipelined(
      client
        .pipeline()
        .time()
        .zcard(due)
        .zrange(due, 0, "0", "WITHSCORES")
        .hmget(layout.seq(bucket), "n", "epoch"),
    );
    const [seconds, micros] = time as [string, string];
    const now = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    // RESP3 pairs each member with its score; RESP2 lists them flat.
    const [, score] = (oldest as unknown[]).flat() as [string?, (string | number)?];
    const [n, epoch] = counter as (string | null)[];
    const backlog = await run(() => client.zcount(due, "-inf", now));
    for (const room of await scan(client, due)) rooms.push({ bucket, room });
    return {
      bucket,
      rooms: Number(count),
      users: 0,
      connections: 0,
      typing: 0,
      backlog,
      lagMs: score !== undefined && Number(score) <= now ? now - Number(score) : null,
      epoch: epoch ?? null,
      events: Number(n ?? 0),
    };
  });
  await mapLimit(rooms, async ({ bucket, room }) => {
    const counts = await countRoom(room);
    const s = stats[bucket]!;
    s.users += counts.users;
    s.typing += counts.typing;
    s.connections += counts.connections;
  });
  return stats;
}

/** The rooms of a due set, each once: ZSCAN may return one twice, but never misses one. */
async function scan(client: Client, key: string): Promise<Set<string>> {
  const rooms = new Set<string>();
  let cursor = "0";
  do {
    const [next, entries] = await run(() => client.zscan(key, cursor, "COUNT", SCAN_COUNT));
    for (let i = 0; i < entries.length; i += 2) rooms.add(entries[i]!);
    cursor = next;
  } while (cursor !== "0");
  return rooms;
}

/** Runs `work` on every item, at most CONCURRENCY at once; stops starting new ones on a failure. */
async function mapLimit<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        results[i] = await work(items[i]!);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
  return results;
}

async function run<T>(command: () => Promise<T>): Promise<T> {
  try {
    return await command();
  } catch (error) {
    throw new RedisCallError("stats", error);
  }
}

/** A pipeline's replies, or its first error. */
async function pipelined(pipeline: ReturnType<Client["pipeline"]>): Promise<unknown[]> {
  const replies = await run(() => pipeline.exec());
  return (replies ?? []).map(([error, reply]) => {
    if (error) throw new RedisCallError("stats", error);
    return reply;
  });
}
