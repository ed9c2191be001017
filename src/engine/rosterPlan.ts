import { invalidOption } from "../protocol/options.js";
import { KEPT, type Layout } from "./layout.js";
import { ROSTER_CURSOR, type Reshaped, type RosterRead } from "./scripts/roster.js";

/** What a room's last page showed of it: its members, and its shards (0: in its own hash). */
interface RoomSize {
  count: number;
  shards: number;
}

/** A roster() cursor, checked: its parts when it names a shard (s<next>:<shards>). */
export interface RosterCursor {
  text: string;
  shard: { next: number; of: number } | null;
}

/** A cursor as roster() takes it ('' for the first page), or a typed INVALID_OPTION error. */
export function rosterCursor(cursor: unknown): RosterCursor {
  const shard = typeof cursor === "string" ? /^s(\d+):(\d+)$/.exec(cursor) : null;
  if (
    typeof cursor !== "string" ||
    cursor.length > 300 ||
    !ROSTER_CURSOR.test(cursor) ||
    (shard !== null && Number(shard[1]) >= Number(shard[2]))
  ) {
    invalidOption("cursor must be what a roster() page returned");
  }
  return { text: cursor, shard: shard && { next: Number(shard[1]), of: Number(shard[2]) } };
}

/**
 * How roster() reads each page of a room, from what the room's last page showed (the sizes of
 * the last KEPT rooms read): a sharded room a few shards at a time (about `limit` members), a
 * room in its own hash whole when it was last seen small (HGETALL, Redis's cheapest read of it),
 * else by HSCAN, which returns a small room whole too.
 */
export class RosterPlanner {
  private readonly sizes = new Map<string, RoomSize>();

  constructor(
    private readonly layout: Layout,
    private readonly limit: number,
  ) {}

  plan(room: string, { text, shard }: RosterCursor): RosterRead {
    const known = this.sizes.get(room) ?? (shard ? { count: NaN, shards: shard.of } : undefined);
    if (known !== undefined && known.shards > 0) {
      const from = shard?.of === known.shards ? shard.next : 0;
      const each = known.count > 0 ? Math.floor((this.limit * known.shards) / known.count) : 1;
      const to = Math.min(known.shards, from + Math.max(1, each));
      const keys = Array.from({ length: to - from }, (_, i) => this.layout.shard(room, from + i));
      return { kind: "shards", keys, next: to, of: known.shards };
    }
    if (/^\d/.test(text)) return { kind: "scan", cursor: text };
    if (!shard && known !== undefined && known.count <= this.limit) return { kind: "whole" };
    return { kind: "scan", cursor: "0" };
  }

  /** What a page read as `read` showed of its room (or found it stored otherwise). */
  learn(room: string, read: RosterRead, page: { count: number } | Reshaped): void {
    const shards = "reshaped" in page ? page.shards : read.kind === "shards" ? read.of : 0;
    if (this.sizes.size >= KEPT) this.sizes.clear();
    this.sizes.set(room, { count: page.count, shards });
  }

  /** The shards the room's last page showed it in (0: unknown, or in its own hash). */
  shards(room: string): number {
    return this.sizes.get(room)?.shards ?? 0;
  }
}
