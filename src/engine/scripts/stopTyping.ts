import type { EventId } from "../../protocol/events.js";
import type { Script } from "../script.js";

export interface StopTypingResult {
  /** The user was typing: a `typing-stop` was published. */
  stopped: boolean;
  event: EventId | null;
}

const OUTCOMES = ["notTyping", "stopped"] as const;

export const stopTyping: Script<{ user: string }, StopTypingResult> = {
  name: "stopTyping",
  outcomes: OUTCOMES,
  args: ({ user }) => [user],
  decode: (reply) => ({
    stopped: reply.outcome(0, OUTCOMES) === "stopped",
    event: reply.event(1),
  }),
};
