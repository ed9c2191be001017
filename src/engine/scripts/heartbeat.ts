import type { EventId } from "../../protocol/events.js";
import type { Arg, Script } from "../script.js";

export interface HeartbeatResult {
  /** True when this heartbeat made the user present (a `join` was published). */
  joined: boolean;
  /** The user was not present and the room held `capacity` members: nothing was written. */
  full: boolean;
  /** The join or update this call published, or null. */
  event: EventId | null;
}

/** One (room, user, connection) to refresh, as the script takes it. */
export interface HeartbeatEntry {
  user: string;
  connection: Arg;
  /** '' or '<capacity>:<state JSON>' (capacity 0: no limit; an empty state keeps the stored one). */
  options: string;
}

/** Entries of one bucket, grouped by room in the order their rooms first come. */
export interface HeartbeatBatch {
  rooms: { room: string; entries: HeartbeatEntry[] }[];
  size: number;
}

const OUTCOMES = ["refreshed", "joined", "full"] as const;
const REFRESHED: HeartbeatResult = Object.freeze({ joined: false, full: false, event: null });

export const heartbeat: Script<HeartbeatBatch, HeartbeatResult[]> = {
  name: "heartbeat",
  outcomes: OUTCOMES,
  args: ({ rooms }) =>
    rooms.flatMap(({ room, entries }) => [
      room,
      entries.length,
      ...entries.flatMap((e) => [e.user, e.connection, e.options]),
    ]),
  decode: (reply, { size }) => {
    const results: HeartbeatResult[] = new Array<HeartbeatResult>(size).fill(REFRESHED);
    // A bare 0: every entry was refreshed, and nothing published.
    if (reply.length === 1) return results;
    const epoch = reply.str(0);
    for (let i = 1; i < reply.length; i += 3) {
      const index = reply.int(i);
      if (index >= size) reply.unexpected(`entry index ${index}`);
      const outcome = reply.outcome(i + 1, OUTCOMES);
      const seq = reply.int(i + 2);
      results[index] = {
        joined: outcome === "joined",
        full: outcome === "full",
        event: seq === 0 ? null : { epoch, seq },
      };
    }
    return results;
  },
};
