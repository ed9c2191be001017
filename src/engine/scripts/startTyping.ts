import type { EventId } from "../../protocol/events.js";
import type { Script } from "../script.js";

export interface TypingResult {
  /** Only present users can type; typing by anyone else changes nothing. */
  present: boolean;
  /** A `typing-start` was published (false when the mark was only refreshed). */
  started: boolean;
  event: EventId | null;
}

const OUTCOMES = ["absent", "refreshed", "started"] as const;

export const startTyping: Script<{ user: string }, TypingResult> = {
  name: "startTyping",
  outcomes: OUTCOMES,
  args: ({ user }) => [user],
  decode: (reply) => {
    const outcome = reply.outcome(0, OUTCOMES);
    return { present: outcome !== "absent", started: outcome === "started", event: reply.event(1) };
  },
};
