import type { EventId } from "../../protocol/events.js";
import type { Script } from "../script.js";

export interface StopTypingResult {
  /** The user was typing: a `typing-stop` was published. */
  stopped: boolean;
  event: EventId | null;
}

export const stopTyping: Script<{ user: string }, StopTypingResult> = {
  name: "stopTyping",
  args: ({ user }) => [user],
  decode: (reply) => ({ stopped: reply.int(0) === 1, event: reply.event(1) }),
};
