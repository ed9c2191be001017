import type { Script } from "../script.js";

export interface UsersApplied {
  /** Users who went online. */
  online: number;
  /** Users who went offline. */
  offline: number;
}

/** After the retention (ms): user changes of the bucket's users, in their streams' order. */
export const users: Script<{ retentionMs: number; changes: readonly string[] }, UsersApplied> = {
  name: "users",
  args: ({ retentionMs, changes }) => [retentionMs, ...changes],
  decode: (reply) => ({ online: reply.int(0), offline: reply.int(1) }),
};
