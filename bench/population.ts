import type { RollcallOptions } from "../src/index.js";

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

/** redis-benchmark replaces this in an argument with a 12-digit number below its -r. */
export const RANDOM = "__rand_int__";

/** `<prefix><i>` as redis-benchmark writes `<prefix>__rand_int__`: i zero-padded to 12 digits. */
export function padded(prefix: string, i: number): string {
  return `${prefix}${String(i).padStart(12, "0")}`;
}

/**
 * `rooms` rooms `r000000000000`… of `usersPerRoom` users `u000000000000`…, one connection each:
 * every room and user that redis-benchmark can draw exists.
 */
export function grid(rooms: number, usersPerRoom: number): Member[] {
  return Array.from({ length: rooms * usersPerRoom }, (_, i) => ({
    room: padded("r", Math.floor(i / usersPerRoom)),
    user: padded("u", i % usersPerRoom),
    connection: "conn-1",
  }));
}

/**
 * Long enough that nobody expires while a section runs: every heartbeat is a refresh. No leave
 * grace, whatever the library's default: a leave is announced at once, as the sections measure.
 */
export const STEADY: RollcallOptions = { presenceWindowMs: 600_000, leaveGraceMs: 0 };
