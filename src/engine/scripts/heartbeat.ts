import type { EventId } from "../../protocol/events.js";
import type { RollcallError } from "../../protocol/errors.js";
import { RedisCallError } from "../errors.js";
import type { Arg, Script } from "../script.js";

export interface HeartbeatResult {
  /** True when this heartbeat made the user present (a `join` was published). */
  joined: boolean;
  /** The user was not present and the room held `capacity` members: nothing was written. */
  full: boolean;
  /** The join or update this call published, or null. */
  event: EventId | null;
}

/**
 * An entry of heartbeatMany that was not applied, with why (a RedisCallError): its bucket's
 * call failed (an outage is REDIS_UNAVAILABLE; the call may have run all the same, its reply
 * lost, and the entry's retry answers what that run did), or Redis, at maxmemory, refused what
 * would grow memory (REDIS_OOM; nothing was written).
 */
export interface HeartbeatFailure {
  readonly error: RollcallError;
}

/** One (room, user, connection) to refresh, as the script takes it. */
export interface HeartbeatEntry {
  user: string;
  connection: Arg;
  /** '' or '<capacity>:<state JSON>' (capacity 0: no limit; an empty state keeps the stored one). */
  options: string;
}

/**
 * Entries of one bucket, grouped by room in the order their rooms first come; a group holds each
 * user once (a user's second entry in a room starts a later group of it).
 */
export interface HeartbeatBatch {
  rooms: { room: string; entries: HeartbeatEntry[] }[];
  size: number;
}

const OUTCOMES = ["refreshed", "joined", "full", "refused"] as const;
const REFRESHED: HeartbeatResult = Object.freeze({ joined: false, full: false, event: null });

// Redis at maxmemory, in its own words: the entry would have grown memory (a join, a new
// connection, a bigger state), and nothing was written.
const REFUSED = "OOM command not allowed when used memory > 'maxmemory' (the entry would grow it)";

export const heartbeat: Script<HeartbeatBatch, (HeartbeatResult | HeartbeatFailure)[]> = {
  name: "heartbeat",
  outcomes: OUTCOMES,
  args: ({ rooms }) => {
    const args: Arg[] = [];
    for (const { room, entries } of rooms) {
      // Each field in a run of its own: the script hands the users to HMGET as they come.
      args.push(room, entries.length);
      for (const e of entries) args.push(e.user);
      for (const e of entries) args.push(e.connection);
      for (const e of entries) args.push(e.options);
    }
    return args;
  },
  decode: (reply, { size }) => {
    const results = new Array<HeartbeatResult | HeartbeatFailure>(size).fill(REFRESHED);
    // A bare 0: every entry was refreshed, and nothing published.
    if (reply.length === 1) return results;
    const epoch = reply.str(0);
    // One error for all the entries refused at maxmemory: a reason told once, not per entry.
    let refused: HeartbeatFailure | undefined;
    for (let i = 1; i < reply.length; i += 3) {
      const index = reply.int(i);
      if (index >= size) reply.unexpected(`entry index ${index}`);
      const outcome = reply.outcome(i + 1, OUTCOMES);
      const seq = reply.int(i + 2);
      if (outcome === "refused") {
        results[index] = refused ??= {
          error: new RedisCallError("heartbeat", new Error(REFUSED)),
        };
        continue;
      }
      results[index] = {
        joined: outcome === "joined",
        full: outcome === "full",
        event: seq === 0 ? null : { epoch, seq },
      };
    }
    return results;
  },
};
