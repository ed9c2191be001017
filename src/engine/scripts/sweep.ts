import type { Script } from "../script.js";

export interface SweepCounts {
  /** Connections dropped for silence. */
  connections: number;
  /** Users announced gone (`leave`, reason expired, or the reason their leave grace began with). */
  leaves: number;
  /** Typing marks announced stopped. */
  typingStops: number;
}

export interface SweepReply extends SweepCounts {
  /** More is due now than this call settled (its batch or room limit was reached). */
  more: boolean;
  /** How long the first room it visited had been due, ms. */
  lagMs: number;
  /** Rooms it visited. */
  rooms: number;
  /** Why a room it passed over failed (a record no script wrote), or null. */
  failure: string | null;
}

/**
 * After the room (ARGV[3]; '' for the bucket's rooms due now): batch, most rooms, and how long
 * the calling sweeper pauses between passes (0: none said), which sets how long a gap between
 * sweeps must be to be a stall of Redis (lua/include/stall.lua).
 */
export const sweep: Script<{ batch: number; rooms: number; everyMs?: number }, SweepReply> = {
  name: "sweep",
  args: ({ batch, rooms, everyMs = 0 }) => [batch, rooms, everyMs],
  decode: (reply) => ({
    connections: reply.int(0),
    leaves: reply.int(1),
    typingStops: reply.int(2),
    more: reply.int(3) === 1,
    lagMs: reply.int(4),
    rooms: reply.int(5),
    failure: reply.str(6) === "" ? null : reply.str(6),
  }),
};
