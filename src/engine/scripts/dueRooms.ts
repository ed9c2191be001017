import type { Script } from "../script.js";

export interface DueRooms {
  /** Rooms of the bucket with something due now, the longest overdue first. */
  rooms: string[];
  /** How long the first of them has been due: how far behind sweeping is. */
  lagMs: number;
}

export const dueRooms: Script<{ limit: number }, DueRooms> = {
  name: "dueRooms",
  args: ({ limit }) => [limit],
  decode: (reply) => ({
    lagMs: reply.int(0),
    rooms: reply.values.slice(1).map((_, i) => reply.str(i + 1)),
  }),
};
