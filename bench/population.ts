import type { RollcallOptions } from "../src/rollcall.js";

/** One connection of one user in one room. */
export interface Member {
  room: string;
  user: string;
  connection: string;
}

/** Full rooms named `<name>-<i>`, users `user-<j>`, one connection each. */
export function members(rooms: number, usersPerRoom: number, name = "room"): Member[] {
  return Array.from({ length: rooms * usersPerRoom }, (_, i) => ({
    room: `${name}-${Math.floor(i / usersPerRoom)}`,
    user: `user-${i % usersPerRoom}`,
    connection: "conn-1",
  }));
}

/** Long enough that nobody expires while a section runs: every heartbeat is a refresh. */
export const STEADY: RollcallOptions = { presenceWindowMs: 600_000 };
