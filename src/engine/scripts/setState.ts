import type { EventId } from "../../protocol/events.js";
import type { Script } from "../script.js";

export interface StateResult {
  present: boolean;
  /** The state differed and an `update` was published. */
  updated: boolean;
  event: EventId | null;
}

const OUTCOMES = ["absent", "unchanged", "updated"] as const;

export const setState: Script<{ user: string; state: string }, StateResult> = {
  name: "setState",
  outcomes: OUTCOMES,
  args: ({ user, state }) => [user, state],
  decode: (reply) => {
    const outcome = reply.outcome(0, OUTCOMES);
    return { present: outcome !== "absent", updated: outcome === "updated", event: reply.event(1) };
  },
};
