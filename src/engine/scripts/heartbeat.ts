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

interface HeartbeatInput {
  user: string;
  connection: Arg;
  state: string;
  /** 0 for no limit. */
  capacity: number;
}

const OUTCOMES = ["refreshed", "joined", "full"] as const;

export const heartbeat: Script<HeartbeatInput, HeartbeatResult> = {
  name: "heartbeat",
  outcomes: OUTCOMES,
  args: ({ user, connection, state, capacity }) => [user, connection, state, capacity],
  decode: (reply) => {
    // A steady heartbeat replies 0 alone.
    const outcome = reply.outcome(0, OUTCOMES);
    const event = reply.length === 1 ? null : reply.event(1);
    return { joined: outcome === "joined", full: outcome === "full", event };
  },
};
