import type { Script } from "../script.js";

/** A room's counts, or a bucket's, as the scripts that change them keep them. */
export interface Counts {
  /** Members, those in their leave grace included. */
  users: number;
  /** Live connections. */
  connections: number;
  /** Members typing. */
  typing: number;
}

export const count: Script<Record<string, never>, Counts> = {
  name: "count",
  args: () => [],
  decode: (reply) => ({ users: reply.int(0), connections: reply.int(1), typing: reply.int(2) }),
};
