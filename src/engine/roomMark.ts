import { UnexpectedReplyError } from "../protocol/errors.js";
import { RedisCallError, refusedAtLimit } from "./errors.js";
import type { Client } from "./script.js";

/** Where a room stands in Redis: what a replica of it must agree with. */
export interface RoomMark {
  /** The sequence space of `seq` ('' for a bucket that never had an event). */
  epoch: string;
  /** The room's last event (0 for a room without members). */
  seq: number;
  /** Members, as the room's meta counts them (0: the room holds no keys). */
  count: number;
  /** Member records the room's hashes hold: `count` unless keys were lost. */
  records: number;
}

/** The room's own hash, its bucket's seq hash, and its shards as last seen (none, usually). */
interface MarkKeys {
  room: string;
  seq: string;
  shards: readonly string[];
}

/**
 * A room's mark in one MULTI of plain O(1) reads, no member read and no script: the room's meta
 * (field '' of its hash, as lua/include/meta.lua packs it: seq in 6 bytes, then the members in
 * 4, …, the shards in the last byte), the bucket's epoch, and HLEN of the room's hashes. A room
 * found in another number of shards than asked is to be read again.
 */
export async function readMark(
  client: Client,
  { room, seq, shards: asked }: MarkKeys,
): Promise<RoomMark | { reshaped: true; shards: number }> {
  // At maxmemory Redis refuses whatever a MULTI queues: the same reads then go in a pipeline,
  // where a change between them can only make the replica check again.
  const read = (batch: ReturnType<Client["pipeline"]>) => {
    batch.hgetBuffer(room, "").hget(seq, "epoch");
    for (const key of asked.length > 0 ? asked : [room]) batch.hlen(key);
    return batch.exec();
  };
  let replies: [Error | null, unknown][] | null;
  try {
    replies = await read(client.multi()).catch((error: unknown) => {
      if (refusedAtLimit(error)) return read(client.pipeline());
      throw error;
    });
  } catch (error) {
    throw new RedisCallError("mark", error);
  }
  const failed = replies?.find(([error]) => error)?.[0];
  if (!replies || failed) throw new RedisCallError("mark", failed ?? new Error("aborted"));
  const [meta, epoch, ...lengths] = replies.map(([, value]) => value);
  if (meta !== null && !(Buffer.isBuffer(meta) && meta.length >= 23)) {
    throw new UnexpectedReplyError("room meta", meta);
  }
  const shards = meta ? meta.readUInt8(22) : 0;
  if (shards !== asked.length) return { reshaped: true, shards };
  const count = meta ? meta.readUInt32BE(6) : 0;
  const stored = lengths.reduce<number>((sum, n) => sum + Number(n), 0);
  return {
    epoch: typeof epoch === "string" ? epoch : "",
    seq: meta ? meta.readUIntBE(0, 6) : 0,
    count,
    // A room in its own hash holds its meta beside its records.
    records: meta && shards === 0 ? stored - 1 : stored,
  };
}
