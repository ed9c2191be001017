import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { Rollcall } from "../src/index.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { members, STEADY, type Member } from "./population.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";
import { info } from "./stats.js";

/**
 * The populations weighed: (a) the baseline's case, (b) a realistic client (a UUID per
 * connection, a small state), (c) and (d) the same with two connections (tabs) per user.
 */
export const MEMORY_VARIANTS = [
  { name: "a", connections: 1, uuid: false, state: false },
  { name: "b", connections: 1, uuid: true, state: true },
  { name: "c", connections: 2, uuid: false, state: false },
  { name: "d", connections: 2, uuid: true, state: true },
] as const;
export type MemoryVariant = (typeof MEMORY_VARIANTS)[number];
export type VariantName = MemoryVariant["name"];

const STATE = { status: "online" };

/** What some keys cost, in bytes, totalled. */
export interface Footprint {
  keys: number;
  /** Sum of MEMORY USAGE (SAMPLES 0: every element) over every key: values and key names. */
  memoryUsage: number;
  /** used_memory after minus before on an otherwise empty Redis: also the keyspace's own
   * entries and the allocator's rounding. */
  usedMemory: number;
  /** MEMORY USAGE by kind of key: rollcall's `u`, `z`, `due`, `seq`, `deployment`…, the baseline's
   * `online`. */
  byKind: Record<string, number>;
}

/** Bytes per connection or per user, both ways. */
export interface Bytes {
  memoryUsage: number;
  usedMemory: number;
}

export interface MemoryCell {
  variant: VariantName;
  users: number;
  connections: number;
  footprint: Footprint;
  perConnection: Bytes;
  perUser: Bytes;
  /** rollcall ÷ the baseline, MEMORY USAGE: per connection (the baseline's one member per user
   * counted as a connection) and per user. */
  ratio: { perConnection: number; perUser: number };
}

export interface MemoryRow {
  roomSize: number;
  users: number;
  /** The baseline's sorted set per room, one member per user: no connections, no state. */
  naive: { footprint: Footprint; perUser: Bytes };
  cells: MemoryCell[];
  /** Right after everyone joined at once, default options: every key weighed, the replies the
   * joins kept included. `ratio`: per connection, × the baseline's per member. */
  storm: { footprint: Footprint; perConnection: Bytes; ratio: number };
}

/** What one kept reply costs: the transient part of the bill (bytes × transitions/s × window). */
export interface ReplayCost {
  joins: number;
  /** The strings holding them: one per bucket and generation of an instance's calls. */
  keys: number;
  /** MEMORY USAGE of the strings per kept reply. */
  memoryUsage: number;
  /** used_memory freed per kept reply when the strings are deleted. */
  usedMemory: number;
  replayWindowMs: number;
  /** Bytes of one entry in a string. */
  entryBytes: number;
}

export interface MemoryResults {
  rows: MemoryRow[];
  replay: ReplayCost;
}

export function memorySteps(p: Profile): number {
  return p.memory.roomSizes.length * (MEMORY_VARIANTS.length + 2) + 1;
}

/**
 * Full rooms of each size, `users` users each time, in rollcall's layout for every variant and in
 * the baseline's. Each cell starts on an empty Redis; the replies the joins kept are deleted before
 * weighing (they expire within the replay window), and weighed apart.
 */
export async function benchMemory(
  lab: Lab,
  profile: Profile,
  progress: Progress,
): Promise<MemoryResults> {
  const { users, roomSizes, replayJoins } = profile.memory;
  const rows: MemoryRow[] = [];
  for (const roomSize of roomSizes) {
    // Whole rooms holding at least `users` users: past the encodings' thresholds at every size.
    const rooms = Math.ceil(users / roomSize);
    const population = members(rooms, roomSize);
    const naive = await progress.step(`memory: rooms of ${roomSize}, seed`, () =>
      naiveFootprint(lab, population),
    );
    const n = population.length;
    const naivePerUser = naive.memoryUsage / n;
    const cells: MemoryCell[] = [];
    for (const variant of MEMORY_VARIANTS) {
      const footprint = await progress.step(
        `memory: rooms of ${roomSize}, rollcall (${variant.name})`,
        () => rollcallFootprint(lab, variant, population),
      );
      const connections = n * variant.connections;
      const perConnection = per(footprint, connections);
      const perUser = per(footprint, n);
      cells.push({
        variant: variant.name,
        users: n,
        connections,
        footprint,
        perConnection,
        perUser,
        ratio: {
          perConnection: perConnection.memoryUsage / naivePerUser,
          perUser: perUser.memoryUsage / naivePerUser,
        },
      });
    }
    const storm = await progress.step(`memory: rooms of ${roomSize}, a storm of joins`, () =>
      stormFootprint(lab, population),
    );
    const stormPerConnection = per(storm, n);
    rows.push({
      roomSize,
      users: n,
      naive: { footprint: naive, perUser: per(naive, n) },
      cells,
      storm: {
        footprint: storm,
        perConnection: stormPerConnection,
        ratio: stormPerConnection.memoryUsage / naivePerUser,
      },
    });
  }
  const replay = await progress.step("memory: kept replies", () => replayCost(lab, replayJoins));
  await lab.flush();
  return { rows, replay };
}

function per(f: Footprint, n: number): Bytes {
  return { memoryUsage: f.memoryUsage / n, usedMemory: f.usedMemory / n };
}

/** A rollcall instance whose scripts are loaded and deployment stored, on an emptied Redis. */
async function freshRollcall(lab: Lab, options = STEADY): Promise<[Rollcall, Redis]> {
  await lab.flush();
  const client = lab.connect({ enableAutoPipelining: true });
  const rollcall = new Rollcall(client, options);
  // Loads the scripts (the script cache is in used_memory) and stores the deployment.
  await rollcall.heartbeat("warm-up", "u", "c");
  await rollcall.leave("warm-up", "u", "c");
  await lab.dropReplies();
  return [rollcall, client];
}

async function rollcallFootprint(
  lab: Lab,
  variant: MemoryVariant,
  population: readonly Member[],
): Promise<Footprint> {
  const [rollcall, client] = await freshRollcall(lab);
  const options = variant.state ? { state: STATE } : {};
  const connections = population.flatMap((m) =>
    Array.from({ length: variant.connections }, (_, i) => ({
      ...m,
      connection: variant.uuid ? randomUUID() : `conn-${i + 1}`,
    })),
  );
  const before = await usedMemory(lab);
  await forEachInFlight(connections, 64, (c) =>
    rollcall.heartbeat(c.room, c.user, c.connection, options),
  );
  await lab.dropReplies();
  const after = await usedMemory(lab);
  lab.release(client);
  return { ...(await weigh(lab)), usedMemory: after - before };
}

/**
 * Everyone joins at once with the default options (connection `c1`, no state) and every key is
 * weighed at once: the replies the joins kept are part of the bill.
 */
async function stormFootprint(lab: Lab, population: readonly Member[]): Promise<Footprint> {
  const [rollcall, client] = await freshRollcall(lab, {});
  const before = await usedMemory(lab);
  await forEachInFlight(population, 64, (m) => rollcall.heartbeat(m.room, m.user, "c1"));
  const after = await usedMemory(lab);
  lab.release(client);
  return { ...(await weigh(lab)), usedMemory: after - before };
}

async function naiveFootprint(lab: Lab, population: readonly Member[]): Promise<Footprint> {
  await lab.flush();
  const client = lab.connect({ enableAutoPipelining: true });
  await client.ping();
  const tracker = new NaiveTracker(client, STEADY.presenceWindowMs! / 1000);
  const before = await usedMemory(lab);
  // update_presence alone: the join's announcement stores nothing.
  await forEachInFlight(population, 64, (m) => tracker.updatePresence(m.room, m.user));
  const after = await usedMemory(lab);
  lab.release(client);
  return { ...(await weigh(lab)), usedMemory: after - before };
}

/**
 * Joins kept their replies: MEMORY USAGE of the strings holding them, and the used_memory their
 * deletion frees, per reply. Rooms of 20, one UUID connection per user with the state.
 */
async function replayCost(lab: Lab, joins: number): Promise<ReplayCost> {
  const [rollcall, client] = await freshRollcall(lab);
  const population = members(Math.ceil(joins / 20), 20).slice(0, joins);
  await forEachInFlight(population, 64, (m) =>
    rollcall.heartbeat(m.room, m.user, randomUUID(), { state: STATE }),
  );
  let keys = 0;
  let bytes = 0;
  let length = 0;
  for await (const batch of lab.admin.scanStream({ match: "{*}:r:*", count: 1_000 })) {
    const names = batch as string[];
    const usage = await Promise.all(
      names.map((key) => lab.admin.memory("USAGE", key, "SAMPLES", 0)),
    );
    const lengths = await Promise.all(names.map((key) => lab.admin.strlen(key)));
    keys += names.length;
    bytes += usage.reduce<number>((sum, u) => sum + (u ?? 0), 0);
    length += lengths.reduce((sum, l) => sum + l, 0);
  }
  const before = await usedMemory(lab);
  const dropped = await lab.dropReplies();
  const after = await usedMemory(lab);
  lab.release(client);
  // Each string starts with the highest call number it kept (lua/include/replay.lua).
  const entryBytes = (length - REPLY_HEADER_BYTES * keys) / joins;
  if (dropped !== keys || entryBytes !== REPLY_ENTRY_BYTES) {
    throw new Error(`${joins} joins kept ${length} bytes in ${keys} strings (${dropped} deleted)`);
  }
  return {
    joins,
    keys,
    memoryUsage: bytes / joins,
    usedMemory: (before - after) / joins,
    replayWindowMs: rollcall.settings.replayWindowMs,
    entryBytes,
  };
}

/** A join's kept reply: call, index, outcome, seq, epoch (see lua/include/replay.lua). */
const REPLY_ENTRY_BYTES = 13;
const REPLY_HEADER_BYTES = 2;

/** MEMORY USAGE of every key, by kind. */
export async function weigh(lab: Lab): Promise<Omit<Footprint, "usedMemory">> {
  let keys = 0;
  let memoryUsage = 0;
  const byKind: Record<string, number> = {};
  for await (const batch of lab.admin.scanStream({ count: 1_000 })) {
    const names = batch as string[];
    const usage = await Promise.all(
      names.map((key) => lab.admin.memory("USAGE", key, "SAMPLES", 0)),
    );
    names.forEach((key, i) => {
      const bytes = usage[i] ?? 0;
      byKind[kindOf(key)] = (byKind[kindOf(key)] ?? 0) + bytes;
      memoryUsage += bytes;
    });
    keys += names.length;
  }
  return { keys, memoryUsage, byKind };
}

/** `{prefix:b}:u:<room>` → `u`, `{prefix:b}:due` → `due`, `rollcall:deployment` → `deployment`. */
export function kindOf(key: string): string {
  const tag = key.startsWith("{") ? key.indexOf("}:") : -1;
  if (tag < 0) return key.slice(key.lastIndexOf(":") + 1);
  const rest = key.slice(tag + 2);
  const colon = rest.indexOf(":");
  return colon < 0 ? rest : rest.slice(0, colon);
}

async function usedMemory(lab: Lab): Promise<number> {
  return Number((await info(lab.admin, "memory")).get("used_memory"));
}
