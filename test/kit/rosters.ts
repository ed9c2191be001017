import type { ReplicaRoster, Snapshot } from "../../src/protocol/replica.js";

/**
 * What a replica keeps of a roster: roster() (or a replica's own roster) without what changes
 * with no event (connections, lastSeen, typedAt, the log position), to compare with a replica.
 */
export function asReplica(r: Snapshot): ReplicaRoster {
  return {
    room: r.room,
    epoch: r.epoch,
    seq: r.seq,
    count: r.count,
    members: r.members.map(({ user, joinedAt, state }) => ({ user, joinedAt, state })),
    typing: [...r.typing],
  };
}
