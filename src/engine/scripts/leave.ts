import type { EventId } from "../../protocol/events.js";
import type { Arg, Script } from "../script.js";

export interface LeaveResult {
  /** The connection was live and is now removed. */
  removed: boolean;
  /** It was the user's last live connection: a `leave` was published. */
  left: boolean;
  /** It was the user's last live connection, and its `leave` waits for the leave grace. */
  leaving: boolean;
  event: EventId | null;
}

const OUTCOMES = ["absent", "removed", "left", "leaving"] as const;

export const leave: Script<{ user: string; connection: Arg }, LeaveResult> = {
  name: "leave",
  outcomes: OUTCOMES,
  args: ({ user, connection }) => [user, connection],
  decode: (reply) => {
    const outcome = reply.outcome(0, OUTCOMES);
    return {
      removed: outcome !== "absent",
      left: outcome === "left",
      leaving: outcome === "leaving",
      event: reply.event(1),
    };
  },
};
