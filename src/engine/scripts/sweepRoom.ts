import type { Script } from "../script.js";

export interface SweepCounts {
  /** Connections dropped for silence. */
  connections: number;
  /** Users announced gone (`leave`, reason expired). */
  leaves: number;
  /** Typing marks announced stopped. */
  typingStops: number;
}

export const sweepRoom: Script<{ batch: number }, SweepCounts & { more: boolean }> = {
  name: "sweepRoom",
  args: ({ batch }) => [batch],
  decode: (reply) => ({
    connections: reply.int(0),
    leaves: reply.int(1),
    typingStops: reply.int(2),
    more: reply.int(3) === 1,
  }),
};
