import type { EventId } from "../../protocol/events.js";
import type { Arg, Script } from "../script.js";

export interface HeartbeatResult {
  /** True when this heartbeat made the user present (a `join` was published). */
  joined: boolean;
  /** The join or update this call published, or null. */
  event: EventId | null;
}

export const heartbeat: Script<{ user: string; connection: Arg; state: string }, HeartbeatResult> =
  {
    name: "heartbeat",
    args: ({ user, connection, state }) => [user, connection, state],
    // A steady heartbeat replies 0 alone.
    decode: (reply) =>
      reply.length === 1 && reply.int(0) === 0
        ? { joined: false, event: null }
        : { joined: reply.int(0) === 1, event: reply.event(1) },
  };
