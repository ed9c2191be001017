import type { Script } from "../script.js";

/** Where a room stands in Redis: what a replica of it must agree with. */
export interface RoomMark {
  /** The sequence space of `seq` ('' for a bucket that never had an event). */
  epoch: string;
  /** The room's last event; for a room without members, the bucket's counter (no room's). */
  seq: number;
  /** Members, as the room's meta counts them (0: the room holds no keys). */
  count: number;
  /** Member records the room's hashes hold: `count` unless keys were lost. */
  records: number;
}

interface MarkInput {
  /** The room's own hash. */
  key: string;
  /** Its shards' hashes, as many as the room was last seen to have. */
  shards: readonly string[];
}

/**
 * A room's mark: lua/roster-3.lua (what a roster page is consistent with), then HLEN of the
 * room's hashes in the same MULTI, no member read. A room found in another number of shards than
 * asked is read again.
 */
export const mark: Script<MarkInput, RoomMark | { reshaped: true; shards: number }> = {
  name: "roster",
  args: () => [],
  reads: ({ key, shards }) =>
    shards.length > 0 ? shards.map((shard) => ["HLEN", shard] as const) : [["HLEN", key]],
  decode: (reply, { shards: asked }) => {
    const count = reply.int(2);
    const shards = reply.int(5);
    if (shards !== asked.length) return { reshaped: true, shards };
    const lengths = reply.reads.map((n) => (typeof n === "number" ? n : reply.unexpected("HLEN")));
    const stored = lengths.reduce((a, b) => a + b, 0);
    // A room in its own hash holds its meta (field '', there while it has members) beside them.
    const records = shards > 0 || count === 0 ? stored : stored - 1;
    return { epoch: reply.str(0), seq: reply.int(1), count, records };
  },
};
