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
    decode: (reply) => ({ joined: reply.int(0) === 1, event: reply.event(1) }),
  };
