import type { Script } from "../script.js";

/** Rooms of a bucket with something due now, at most `limit`. */
export const dueRooms: Script<{ limit: number }, string[]> = {
  name: "dueRooms",
  args: ({ limit }) => [limit],
  decode: (reply) => reply.values.map((_, i) => reply.str(i)),
};
