import type { Rollcall } from "../../src/index.js";
import type { CallRecord } from "./invariants.js";
import type { Random } from "./random.js";

export type Op = CallRecord["op"];

/** How often each call is drawn: mostly heartbeats, as a gateway sends them. */
export const MIX: Readonly<Record<Op, number>> = {
  heartbeat: 45,
  leave: 15,
  startTyping: 15,
  stopTyping: 10,
  setState: 15,
};

const CONNECTIONS = ["c0", "c1"];
const MOODS = ["here", "away", "busy"];

/** One random call on a few users, rooms and connections; rejects as the engine does. */
export async function randomCall(
  rc: Rollcall,
  rng: Random,
  rooms: readonly string[],
  users: readonly string[],
): Promise<CallRecord> {
  const op = rng.weighted(MIX);
  const room = rng.pick(rooms);
  const user = rng.pick(users);
  const connection = rng.pick(CONNECTIONS);
  const state = () => ({ mood: rng.pick(MOODS) });
  switch (op) {
    case "heartbeat": {
      const options = rng.next() < 0.2 ? { state: state() } : undefined;
      return { op, room, user, result: await rc.heartbeat(room, user, connection, options) };
    }
    case "leave":
      return { op, room, user, result: await rc.leave(room, user, connection) };
    case "startTyping":
      return { op, room, user, result: await rc.startTyping(room, user) };
    case "stopTyping":
      return { op, room, user, result: await rc.stopTyping(room, user) };
    case "setState":
      return { op, room, user, result: await rc.setState(room, user, state()) };
  }
}
