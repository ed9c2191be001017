import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { Rollcall } from "../src/index.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { members, STEADY, type Member } from "./population.js";
import type { Progress } from "./progress.js";
import { info } from "./stats.js";
import { number, ratio, table } from "./format.js";
import type { Row, Section } from "./section.js";

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

/** Users per cell (past the compact encodings), and joins whose kept replies are weighed. */
export interface MemoryProfile {
  users: number;
  roomSizes: number[];
  replayJoins: number;
}

export interface MemoryResults {
  rows: MemoryRow[];
  replay: ReplayCost;
}

function memorySteps(p: MemoryProfile): number {
  return p.roomSizes.length * (MEMORY_VARIANTS.length + 2) + 1;
}

/**
 * Full rooms of each size, `users` users each time, in rollcall's layout for every variant and in
 * the baseline's. Each cell starts on an empty Redis; the replies the joins kept are deleted before
 * weighing (they expire within the replay window), and weighed apart.
 */
async function benchMemory(
  lab: Lab,
  profile: MemoryProfile,
  progress: Progress,
): Promise<MemoryResults> {
  const { users, roomSizes, replayJoins } = profile;
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

const VARIANT_LABEL: Record<VariantName, string> = {
  a: "(a) 1 short-id connection per user, no state",
  b: '(b) 1 UUID connection per user, state {"status":"online"}',
  c: "(c) 2 short-id connections per user, no state",
  d: "(d) 2 UUID connections per user, the same state",
};

function memorySection({ rows, replay }: MemoryResults): string {
  const cellOf = (row: MemoryRow, v: VariantName) => row.cells.find((c) => c.variant === v)!;
  const byVariant = (cell: (c: MemoryCell, row: MemoryRow) => string) =>
    rows.map((row) => [
      number(row.roomSize),
      ...MEMORY_VARIANTS.map((v) => cell(cellOf(row, v.name), row)),
    ]);
  const header = (first: string) => [first, ...MEMORY_VARIANTS.map((v) => VARIANT_LABEL[v.name])];
  const kinds = [
    ...new Set(rows.flatMap((row) => row.cells.flatMap((c) => Object.keys(c.footprint.byKind)))),
  ].sort();
  const kept = replay.usedMemory;
  return [
    "## Memory: bytes per connection and per user",
    "",
    `Full rooms, at least ${number(Math.min(...rows.map((row) => row.users)))} users per cell ` +
      "(whole rooms; connections in the targets), each cell on an emptied Redis. " +
      "The baseline's layout (a sorted set per room, user → time) has one member per user and no " +
      "state, so it is compared per connection (its member standing for the connection) and per " +
      "user. *MEMORY USAGE*: the sum over every key (SAMPLES 0: every element), values and key " +
      "names. *used_memory Δ*: the growth of INFO used_memory, which adds the keyspace's own " +
      "entries, expiry entries and the allocator's rounding. Replies kept for resends are " +
      "deleted before weighing (they last the replay window; weighed below).",
    "",
    "### MEMORY USAGE per connection (× the baseline's per member)",
    "",
    table(
      [...header("room size"), "baseline"],
      byVariant(
        (c) => `${number(c.perConnection.memoryUsage)} (${ratio(c.ratio.perConnection)})`,
      ).map((cells, i) => [...cells, number(rows[i]!.naive.perUser.memoryUsage)]),
    ),
    "",
    "### Right after a storm of joins",
    "",
    "Everyone joins at once with the default options (connection `c1`, no state) and every key " +
      "is weighed at once, the replies the joins kept for resends included.",
    "",
    table(
      ["room size", "connections", "MEMORY USAGE per connection", "baseline", "× baseline"],
      rows.map((row) => [
        number(row.roomSize),
        number(row.users),
        number(row.storm.perConnection.memoryUsage),
        number(row.naive.perUser.memoryUsage),
        ratio(row.storm.ratio),
      ]),
    ),
    "",
    "### MEMORY USAGE per user (× the baseline's)",
    "",
    table(
      [...header("room size"), "baseline"],
      byVariant((c) => `${number(c.perUser.memoryUsage)} (${ratio(c.ratio.perUser)})`).map(
        (cells, i) => [...cells, number(rows[i]!.naive.perUser.memoryUsage)],
      ),
    ),
    "",
    "### used_memory Δ per connection, per user",
    "",
    table(
      [...header("room size"), "baseline"],
      byVariant(
        (c, row) =>
          `${number(c.perConnection.usedMemory)}, ${number(c.perUser.usedMemory)} ` +
          `(${ratio(c.perUser.usedMemory / row.naive.perUser.usedMemory)} per user)`,
      ).map((cells, i) => [...cells, number(rows[i]!.naive.perUser.usedMemory)]),
    ),
    "",
    "### rollcall's MEMORY USAGE per connection by kind of key",
    "",
    "`u` the room hashes (user → packed record), `z` the index of rooms over 128 members, `due` " +
      "the buckets' room → deadline zsets, `seq` the buckets' counters, `deployment` the " +
      "settings; keys per cell in the last column.",
    "",
    table(
      ["room size", "variant", ...kinds, "keys"],
      rows.flatMap((row) =>
        row.cells.map((c) => [
          number(row.roomSize),
          c.variant,
          ...kinds.map((k) => number((c.footprint.byKind[k] ?? 0) / c.connections, 1)),
          number(c.footprint.keys),
        ]),
      ),
    ),
    "",
    "### Kept replies (transient)",
    "",
    `A call that changed something keeps its reply for the replay window ` +
      `(${number(replay.replayWindowMs / 1000)} s by default), so that a resend gets it again: ` +
      `${number(replay.entryBytes)} bytes appended to one string per bucket and generation of an ` +
      `instance's calls (after a 2-byte header: the highest call number kept in it). Over ${number(replay.joins)} joins: ${number(replay.keys)} strings, ` +
      `MEMORY USAGE ${number(replay.memoryUsage, 1)} B per reply, used_memory ` +
      `${number(kept, 1)} B per reply. A deployment holds about bytes × transitions/s × replay ` +
      "window of them: at 1,000 joins, leaves, typing and state changes a second, " +
      `${number((kept * 1_000 * replay.replayWindowMs) / 1000 / 1e6, 1)} MB.`,
  ].join("\n");
}

/** Bytes per connection against the baseline's, steady and right after a storm of joins. */
function rows({ rows }: MemoryResults): Row[] {
  const limits = [
    { variant: "a", limit: 2, what: "one short-id connection per user, no state" },
    { variant: "b", limit: 3, what: 'one UUID connection per user, state {"status":"online"}' },
  ] as const;
  const steady = limits.flatMap(({ variant, limit, what }) =>
    rows.map((row): Row => {
      const cell = row.cells.find((c) => c.variant === variant)!;
      return {
        name:
          `memory (${variant}), ${what}, rooms of ${number(row.roomSize)}: ` +
          `≤ ${limit}× the baseline's bytes per connection`,
        value: cell.ratio.perConnection,
        unit: "×",
        digits: 2,
        note:
          `${number(cell.perConnection.memoryUsage)} B vs ` +
          `${number(row.naive.perUser.memoryUsage)} B, ${number(cell.connections)} connections`,
        target: { op: "≤", limit },
      };
    }),
  );
  const storms = rows.map((row): Row => ({
    name:
      `memory right after a storm of joins (default options, replies kept), rooms of ` +
      `${number(row.roomSize)}: ≤ 2.5× the baseline's bytes per connection`,
    value: row.storm.ratio,
    unit: "×",
    digits: 2,
    note: `${number(row.storm.perConnection.memoryUsage)} B vs ${number(row.naive.perUser.memoryUsage)} B`,
    target: { op: "≤", limit: 2.5 },
  }));
  return [...steady, ...storms];
}

/** Bytes per connection and per user in rollcall's layout and the baseline's, and kept replies. */
export const memory: Section<MemoryProfile, MemoryResults> = {
  name: "memory",
  profiles: {
    full: { users: 20_000, roomSizes: [5, 20, 128, 1_000], replayJoins: 10_000 },
    smoke: { users: 1_000, roomSizes: [5, 20, 128, 1_000], replayJoins: 1_000 },
  },
  steps: memorySteps,
  run: benchMemory,
  report: memorySection,
  rows,
};
