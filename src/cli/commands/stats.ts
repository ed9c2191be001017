import type { Rollcall } from "../../engine/rollcall.js";
import type { Client } from "../../engine/script.js";
import type { Command } from "../args.js";
import { deploymentRollcall, pipelined, redisMs, withClient } from "../connect.js";
import { duration, paint, print } from "../format.js";
import { table } from "../table.js";

/** Calls in flight at once, for the rosters and the buckets' own reads. */
const CONCURRENCY = 64;
/** The most one roster() lists (settle's bound): connections and typists are exact up to it. */
const ROSTER_LIMIT = 100_000;
const SCAN_COUNT = 1_000;

interface Counts {
  /** Rooms in the bucket's due set: every room with a member. */
  rooms: number;
  users: number;
  connections: number;
  typing: number;
  /** Rooms whose due score has passed (Redis's TIME): what the sweepers have yet to settle. */
  backlog: number;
  /** How long the oldest of them has been due, ms, or null when nothing is: the sweepers' lag. */
  lagMs: number | null;
}

export interface BucketStats extends Counts {
  bucket: number;
  /** The bucket's event epoch and counter (null and 0 before its first event). */
  epoch: string | null;
  events: number;
}

/** `stats [--json]`: per bucket and in total. */
export async function stats({ json, target }: Command): Promise<number> {
  await withClient(target, async (client) => {
    const rollcall = await deploymentRollcall(client, target.prefix, {
      rosterLimit: ROSTER_LIMIT,
    });
    const buckets = await collect(client, rollcall);
    const total = sum(buckets);
    if (json) print(JSON.stringify({ buckets, total }, null, 2));
    else render(buckets, total);
  });
  return 0;
}

async function collect(client: Client, rollcall: Rollcall): Promise<BucketStats[]> {
  const { layout } = rollcall;
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
    const now = redisMs(time);
    // RESP3 pairs each member with its score; RESP2 lists them flat.
    const [, score] = (oldest as unknown[]).flat() as [string?, (string | number)?];
    const [n, epoch] = counter as (string | null)[];
    const backlog = await client.zcount(due, "-inf", now);
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
    const r = await rollcall.roster(room);
    const s = stats[bucket]!;
    s.users += r.count;
    s.typing += r.typing.length;
    for (const m of r.members) s.connections += m.connections;
  });
  return stats;
}

/** The rooms of a due set, each once: ZSCAN may return one twice, but never misses one. */
async function scan(client: Client, key: string): Promise<Set<string>> {
  const rooms = new Set<string>();
  let cursor = "0";
  do {
    const [next, entries] = await client.zscan(key, cursor, "COUNT", SCAN_COUNT);
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

function sum(buckets: readonly BucketStats[]): Counts {
  const total: Counts = { rooms: 0, users: 0, connections: 0, typing: 0, backlog: 0, lagMs: null };
  for (const b of buckets) {
    total.rooms += b.rooms;
    total.users += b.users;
    total.connections += b.connections;
    total.typing += b.typing;
    total.backlog += b.backlog;
    if (b.lagMs !== null) total.lagMs = Math.max(total.lagMs ?? 0, b.lagMs);
  }
  return total;
}

function render(buckets: readonly BucketStats[], total: Counts): void {
  const counts = (c: Counts) => [
    String(c.rooms),
    String(c.users),
    String(c.connections),
    String(c.typing),
    String(c.backlog),
    c.lagMs === null ? "-" : duration(c.lagMs),
  ];
  const lines = table(
    [
      ["bucket", "rooms", "users", "connections", "typing", "backlog", "lag", "events", "epoch"],
      ...buckets.map((b) => [String(b.bucket), ...counts(b), String(b.events), b.epoch ?? "-"]),
      ["total", ...counts(total), "", ""],
    ],
    ["right", "right", "right", "right", "right", "right", "right", "right"],
  );
  const header = lines.shift() ?? "";
  const last = lines.pop() ?? "";
  print(paint("dim", header));
  lines.forEach((line) => print(line));
  print(paint("bold", last));
}
