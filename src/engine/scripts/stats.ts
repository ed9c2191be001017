import type { Script } from "../script.js";
import type { Counts } from "./count.js";

/** What one bucket holds. */
export interface BucketStats extends Counts {
  bucket: number;
  /** Rooms with a member. */
  rooms: number;
  /** Rooms whose due score has passed (Redis's time): what the sweepers have yet to settle. */
  backlog: number;
  /** How long the oldest of them has been due, ms, or null when nothing is: the sweepers' lag. */
  lagMs: number | null;
  /** The bucket's event epoch and counter (null and 0 before its first event). */
  epoch: string | null;
  events: number;
}

export const stats: Script<{ bucket: number }, BucketStats> = {
  name: "stats",
  args: () => [],
  decode: (reply, { bucket }) => {
    const lag = reply.int(5);
    const epoch = reply.str(6);
    return {
      bucket,
      rooms: reply.int(0),
      users: reply.int(1),
      connections: reply.int(2),
      typing: reply.int(3),
      backlog: reply.int(4),
      lagMs: lag < 0 ? null : lag,
      epoch: epoch === "" ? null : epoch,
      events: reply.int(7),
    };
  },
};
