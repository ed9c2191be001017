import { RedisCallError } from "./errors.js";
import { bucketOf, type Layout } from "./layout.js";
import { masters } from "./memoryPolicy.js";
import type { Client } from "./script.js";

/** Keys one SCAN call looks at: Redis's work per call stays small whatever the keyspace. */
const SCAN_COUNT = 1_000;

/**
 * Finds the deployment's rooms by their own keys (`{prefix:bucket}:u:<room>`), whatever index
 * may have lost them: a SCAN of every master, a bounded step at a time. Each step's rooms go to
 * `visit`, grouped by bucket, before the next step is read. A room is named at least once if its
 * key exists throughout; one may be named twice (SCAN's promise).
 */
export async function roomsOfBuckets(
  client: Client,
  layout: Layout,
  visit: (bucket: number, rooms: string[]) => Promise<void>,
): Promise<void> {
  const { prefix, buckets } = layout;
  // The prefix holds no glob characters (settings refuse them); the tag's bucket is digits.
  const pattern = `{${prefix}:*}:u:*`;
  const roomKey = new RegExp(`^\\{${prefix.replace(/[.]/g, "\\.")}:(\\d+)\\}:u:(.+)$`, "s");
  await Promise.all(
    masters(client).map(async (node) => {
      let cursor = "0";
      do {
        let keys: string[];
        try {
          [cursor, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", SCAN_COUNT);
        } catch (error) {
          throw new RedisCallError("scan of the rooms", error);
        }
        const found = new Map<number, string[]>();
        for (const key of keys) {
          const [, tag, room] = roomKey.exec(key) ?? [];
          const bucket = Number(tag);
          // A hidden room (invisible connections, '\u0001' and the room's id) is in its room's bucket.
          const owner = room?.startsWith("\u0001") ? room.slice(1) : room;
          if (room === undefined || owner === undefined || bucket >= buckets) continue;
          if (bucketOf(owner, buckets) !== bucket) {
            continue;
          }
          let rooms = found.get(bucket);
          if (!rooms) found.set(bucket, (rooms = []));
          rooms.push(room);
        }
        await Promise.all([...found].map(([bucket, rooms]) => visit(bucket, rooms)));
      } while (cursor !== "0");
    }),
  );
}
