import { readdirSync, readFileSync } from "node:fs";
import { Rollcall } from "../src/index.js";
import { REPLAY_GENERATION } from "../src/engine/layout.js";
import { expandIncludes, includeReader, LUA_DIR } from "../src/engine/loader.js";
import { captureEvalsha, makeSteady } from "./ceiling.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { NAIVE_JOIN, NAIVE_LEAVE, NAIVE_TYPING, type TypingParts, typingFlat } from "./lua.js";
import { number, ratio, table } from "./format.js";
import { padded } from "./population.js";
import type { Progress } from "./progress.js";
import { commandStats, median, resetStats } from "./stats.js";
import type { Row, Section } from "./section.js";

/**
 * What each script costs Redis on the path a call takes, beside what its definitions alone cost
 * (the script cut before its first statement, `return 0`, sent the same keys and arguments): so
 * that helpers defined for paths a call does not take cannot hide in its cost again. The
 * transitions are measured beside the naive tracker's equivalents as one script each.
 */
export interface ScriptsProfile {
  roomSizes: number[];
  /** Rooms per size: calls per measured path. */
  rooms: number;
}

export interface ScriptCost {
  /** The script and the path its calls took. */
  script: string;
  path: string;
  roomSize: number;
  /** Redis time per call, µs (INFO commandstats), of the path, and of its definitions alone. */
  us: number;
  definitionsUs: number;
  /** The naive tracker's equivalent as one script, where it has one. */
  naiveUs: number | null;
}

/**
 * A typing start's commands with the least Lua around them (bench/lua.ts, typingFlat), beside the
 * script's, sent the same way: Redis time per call, µs, whole and without each part of its work.
 */
export interface FlatTyping {
  roomSize: number;
  script: number;
  flat: number;
  /** The naive tracker's typing start as one script. */
  naive: number;
  without: Record<keyof TypingParts, number>;
}

export interface ScriptsResults {
  rooms: number;
  costs: ScriptCost[];
  flat: FlatTyping[];
}

const PARTS: Record<keyof TypingParts, string> = {
  epoch: "the epoch's check (INFO replication, HMGET)",
  keptReply: "the kept reply (GETRANGE, SETRANGE, APPEND, PEXPIRE)",
  mac: "the event's mac (SHA-1)",
  counts: "the bucket's count (HINCRBY, HGET)",
};
const PART_NAMES = Object.keys(PARTS) as (keyof TypingParts)[];
const WHOLE: TypingParts = { epoch: true, keptReply: true, mac: true, counts: true };

/** The script's source up to its first statement (its header and include lines), expanded. */
export function definitionsOnly(script: string): string {
  const file = readdirSync(LUA_DIR).find((f) => f.startsWith(`${script}-`));
  if (!file) throw new Error(`no lua/${script}-N.lua`);
  const lines = readFileSync(new URL(file, LUA_DIR), "utf8").split("\n");
  const header = lines.findIndex((line) => line.startsWith("]]")) + 1;
  let end = header;
  while (lines[end]?.startsWith("-- @include ")) end++;
  const source = [...lines.slice(0, end), "return 0"].join("\n");
  return expandIncludes(source, file, includeReader(LUA_DIR));
}

/**
 * Redis time of scripts since the last reset (EVALSHA and EVAL alike), µs per call made: per
 * `made` calls when given (the scripts they caused, such as the users script applying a join's
 * user change, count towards them), else per script run.
 */
async function usPerCall(lab: Lab, made?: number): Promise<number> {
  const stats = await commandStats(lab.admin);
  const [calls, usec] = ["evalsha", "eval"].reduce(
    ([c, u], name) => [c + (stats.get(name)?.calls ?? 0), u + (stats.get(name)?.usec ?? 0)],
    [0, 0],
  );
  if (calls === 0) throw new Error("no script ran");
  return usec / (made ?? calls);
}

/**
 * Each call once per room, timed by Redis; one of them captured first, for its definitions.
 * `settled` resolves once what the calls set going in the background (the user changes of joins
 * and leaves, applied after them) is done: a call's figure includes it, and nothing of it spills
 * into the capture or the next measure.
 */
async function measure(
  lab: Lab,
  count: number,
  call: (i: number) => Promise<unknown>,
  settled: () => Promise<unknown>,
): Promise<{ us: number; command: string[] }> {
  await call(0);
  await settled();
  const command = await captureEvalsha(lab, () => call(1));
  await settled();
  await lab.collectLuaGarbage();
  await resetStats(lab.admin);
  await forEachInFlight(
    Array.from({ length: count - 2 }, (_, i) => i + 2),
    16,
    call,
  );
  await settled();
  return { us: await usPerCall(lab, count - 2), command };
}

/** Redis time per call of `lua`, sent each of `calls` (keys and arguments as EVALSHA takes). */
async function scriptUs(lab: Lab, lua: string, calls: readonly string[][]): Promise<number> {
  return shaUs(lab, (await lab.admin.script("LOAD", lua)) as string, calls);
}

/** The same for a script loaded already, named by its SHA-1. */
async function shaUs(lab: Lab, sha: string, calls: readonly string[][]): Promise<number> {
  const client = lab.connect({ enableAutoPipelining: true });
  await lab.collectLuaGarbage();
  await resetStats(lab.admin);
  await Promise.all(calls.map((args) => client.call("EVALSHA", sha, ...args)));
  lab.release(client);
  return usPerCall(lab);
}

function scriptsSteps(profile: ScriptsProfile): number {
  return profile.roomSizes.length;
}

async function benchScripts(
  lab: Lab,
  profile: ScriptsProfile,
  progress: Progress,
): Promise<ScriptsResults> {
  const costs: ScriptCost[] = [];
  const flat: FlatTyping[] = [];
  for (const roomSize of profile.roomSizes) {
    await progress.step(`scripts: rooms of ${roomSize}`, async () => {
      const sized = await roomsOf(lab, profile.rooms, roomSize);
      costs.push(...sized.costs);
      flat.push(sized.flat);
      await lab.flush();
    });
  }
  return { rooms: profile.rooms, costs, flat };
}

/** `rooms` rooms of roomSize - 1 present users; each path once per room, by one more user. */
async function roomsOf(
  lab: Lab,
  rooms: number,
  roomSize: number,
): Promise<{ costs: ScriptCost[]; flat: FlatTyping }> {
  const client = lab.connect({ enableAutoPipelining: true });
  // One bucket and an hour's window: nobody expires, every room's keys share one tag.
  const rollcall = new Rollcall(client, {
    prefix: `scripts${roomSize}`,
    buckets: 1,
    presenceWindowMs: 3_600_000,
    leaveGraceMs: 0,
    keyTtlMs: 30 * 86_400_000,
  });
  const room = (i: number) => padded("r", i);
  const others = Array.from({ length: rooms * (roomSize - 1) }, (_, i) => ({
    room: room(Math.floor(i / (roomSize - 1))),
    user: padded("u", i % (roomSize - 1)),
  }));
  await forEachInFlight(others, 64, (m) => rollcall.heartbeat(m.room, m.user, "c1"));
  const naiveKey = (i: number) => `naive${roomSize}:${room(i)}`;
  for (let i = 0; i < rooms; i++) {
    const members = Array.from({ length: roomSize - 1 }, (_, u) => [Date.now() / 1000, `u${u}`]);
    await client.zadd(naiveKey(i), ...members.flat());
  }
  const costs: ScriptCost[] = [];
  const path = async (
    script: string,
    name: string,
    call: (i: number) => Promise<unknown>,
    naive: number | null = null,
    atLimit = false,
  ) => {
    // At maxmemory Redis refuses the script before it runs (no script time), and its variant
    // for the limit runs: what the path costs is that run.
    if (atLimit) await lab.admin.config("SET", "maxmemory", "1");
    const settled = () => rollcall.applyUserChanges(0);
    const { us, command } = await measure(lab, rooms, call, settled).finally(
      () => atLimit && lab.admin.config("SET", "maxmemory", "0"),
    );
    const definitions = await scriptUs(
      lab,
      definitionsOnly(script),
      Array.from({ length: rooms }, () => command.slice(2)),
    );
    costs.push({ script, path: name, roomSize, us, definitionsUs: definitions, naiveUs: naive });
    return command;
  };
  const joinerAt = (i: number) => [naiveKey(i), `presence:${room(i)}:events`];
  const naiveJoin = await scriptUs(
    lab,
    NAIVE_JOIN,
    Array.from({ length: rooms }, (_, i) => ["2", ...joinerAt(i), "joiner", "3600"]),
  );
  await path("heartbeat", "join", (i) => rollcall.heartbeat(room(i), "joiner", "c1"), naiveJoin);
  // A connection's first beats after its join are not steady (they may be the join resent).
  const joiners = Array.from({ length: rooms }, (_, i) => ({
    room: room(i),
    user: "joiner",
    connection: "c1",
  }));
  await makeSteady(lab, rollcall, joiners);
  await path("heartbeat", "steady", (i) => rollcall.heartbeat(room(i), "joiner", "c1"));
  const beat = (i: number) => rollcall.heartbeat(room(i), "joiner", "c1");
  await path("heartbeat", "steady at the memory limit", beat, null, true);
  await path("setState", "update", (i) => rollcall.setState(room(i), "joiner", { s: 1 }));
  const naiveTyping = await scriptUs(
    lab,
    NAIVE_TYPING,
    Array.from({ length: rooms }, (_, i) => [
      "2",
      `${naiveKey(i)}:typing`,
      joinerAt(i)[1]!,
      "joiner",
      "15",
    ]),
  );
  const start = (i: number) => rollcall.startTyping(room(i), "joiner");
  const typing = await path("startTyping", "start", start, naiveTyping);
  await path("stopTyping", "stop", (i) => rollcall.stopTyping(room(i), "joiner"));
  await path("roster", "page", (i) => rollcall.roster(room(i)));
  await path("count", "read", (i) => rollcall.count(room(i)));
  await path("sweep", "nothing due", () => rollcall.sweepBucket(0));
  const naiveLeave = await scriptUs(
    lab,
    NAIVE_LEAVE,
    Array.from({ length: rooms }, (_, i) => ["2", ...joinerAt(i), "joiner", "3600"]),
  );
  await path("leave", "leave", (i) => rollcall.leave(room(i), "joiner", "c1"), naiveLeave);
  const flat = await flatTyping(lab, rollcall, typing, rooms, room);
  lab.release(client);
  const { naiveUs } = costs.find((c) => c.script === "startTyping")!;
  return { costs, flat: { roomSize, naive: naiveUs!, ...flat } };
}

/** Rounds of the flat typing starts and the script's, in turns (median of each). */
const FLAT_ROUNDS = 3;

/**
 * The script's typing start and the flat ones, each sent the same way (every room's call at once,
 * through scriptUs) by a member present since the rooms filled, in the same state: not typing,
 * the room's due entry an hour ahead (as the script's measured path found them). `typing` is the
 * script's captured call: its keys and settings, with call numbers of its own above any the
 * engine uses (a first run, never a resend).
 */
async function flatTyping(
  lab: Lab,
  rollcall: Rollcall,
  typing: string[],
  rooms: number,
  room: (i: number) => string,
): Promise<Omit<FlatTyping, "roomSize" | "naive">> {
  const [, sha, keyCount, ...rest] = typing;
  const keys = rest.slice(0, Number(keyCount));
  const settings = rest[keys.length]!;
  const user = padded("u", 0);
  // A call number is 2 bytes in the kept replies' header (lua/include/replay.lua).
  let callNumber = REPLAY_GENERATION;
  const calls = () => {
    if (callNumber + rooms > 65_535)
      throw new Error("the flat typing starts ran out of call numbers");
    return Array.from({ length: rooms }, (_, i) => [
      keyCount!,
      ...keys,
      settings,
      String(callNumber++),
      room(i),
      user,
    ]);
  };
  const variants: [string, string][] = [
    ["script", ""],
    ["flat", typingFlat(WHOLE)],
    ...PART_NAMES.map((part): [string, string] => [part, typingFlat({ ...WHOLE, [part]: false })]),
  ];
  const us = new Map<string, number[]>(variants.map(([name]) => [name, []]));
  for (let round = 0; round < FLAT_ROUNDS; round++) {
    // In turns, the order turning each round, so that drift on the host hits them alike.
    for (let k = 0; k < variants.length; k++) {
      const [name, lua] = variants[(k + round) % variants.length]!;
      await forEachInFlight(
        Array.from({ length: rooms }, (_, i) => i),
        64,
        (i) => rollcall.stopTyping(room(i), user),
      );
      const far = Date.now() + 3_600_000;
      await lab.admin.zadd(
        keys[0]!,
        "XX",
        ...Array.from({ length: rooms }, (_, i) => [far, room(i)]).flat(),
      );
      us.get(name)!.push(
        lua === "" ? await shaUs(lab, sha!, calls()) : await scriptUs(lab, lua, calls()),
      );
    }
  }
  const middle = (name: string) => median(us.get(name)!, (x) => x);
  const without = {} as Record<keyof TypingParts, number>;
  for (const part of PART_NAMES) without[part] = middle(part);
  return { script: middle("script"), flat: middle("flat"), without };
}

function scriptsSection(s: ScriptsResults): string {
  return [
    "## What each script costs on its path",
    "",
    `Redis time per call (INFO commandstats), ${number(s.rooms)} calls of each path in rooms of ` +
      "each size, one bucket: *path*, what the call did; *definitions*, the same keys and " +
      "arguments sent to the script cut before its first statement (what a call pays before it " +
      "does anything); *baseline scripted*, the naive tracker's equivalent as one script (a " +
      "join: update_presence, get_online_users, PUBLISH; a leave: remove_presence, " +
      "get_online_users, PUBLISH; a typing start: set_typing, PUBLISH).",
    "",
    table(
      ["script", "path", "room size", "path µs", "definitions µs", "baseline scripted µs", "ratio"],
      s.costs.map((c) => [
        c.script,
        c.path,
        number(c.roomSize),
        number(c.us, 2),
        number(c.definitionsUs, 2),
        c.naiveUs === null ? "" : number(c.naiveUs, 2),
        c.naiveUs === null ? "" : ratio(c.us / c.naiveUs),
      ]),
    ),
    "",
    "### A typing start's commands, with the least Lua around them",
    "",
    "Where a transition's time goes: the typing start's work on its path (the same record, meta, " +
      "event, mac and kept reply written) in the fewest commands, flat, with no helper, no " +
      "decoded record and no module (bench/lua.ts, `typingFlat`): 15 commands where the script " +
      "runs 18 (one HMGET for its two HGETs, one HSET of the meta for its two, and no EXISTS of " +
      "the index, which rooms this small never have), and none of the checks the script makes " +
      "on the way (overdue, grace, hidden room, reconcile, the epoch's owner). Then the same " +
      "without each part of its work: a part's column is what leaving it out saved. The script " +
      "and the flat ones are sent alike here (every room's call at once, " +
      `${number(s.rooms)} calls, not 16 in flight as above), in the same state (the ` +
      "member not typing, the room's due entry an hour ahead), in turns, " +
      `${FLAT_ROUNDS} rounds, the median shown. *Lua's structure* is the script less the flat ` +
      "one: what restructuring the Lua could remove at most.",
    "",
    table(
      [
        "room size",
        "script µs",
        "flat µs",
        "Lua's structure µs",
        "flat ÷ baseline scripted",
        ...Object.values(PARTS).map((p) => `${p} µs`),
      ],
      s.flat.map((f) => [
        number(f.roomSize),
        number(f.script, 2),
        number(f.flat, 2),
        number(f.script - f.flat, 2),
        ratio(f.flat / f.naive),
        ...PART_NAMES.map((p) => number(f.flat - f.without[p], 2)),
      ]),
    ),
  ].join("\n");
}

/** Each script's Redis time on its paths, beside its definitions alone and the baseline's. */
export const scripts: Section<ScriptsProfile, ScriptsResults> = {
  name: "scripts",
  profiles: {
    full: { roomSizes: [5, 20], rooms: 2_000 },
    smoke: { roomSizes: [5, 20], rooms: 30 },
  },
  steps: scriptsSteps,
  run: benchScripts,
  report: scriptsSection,
  rows: (s) =>
    s.costs.flatMap((c): Row[] =>
      c.naiveUs === null
        ? []
        : [
            {
              name:
                `${c.script} (${c.path}), Redis time per call ≤ the baseline's equivalent as ` +
                `one script, rooms of ${number(c.roomSize)}`,
              value: c.us / c.naiveUs,
              unit: "×",
              digits: 2,
              note: `${number(c.us, 2)} µs vs ${number(c.naiveUs, 2)} µs`,
              target: { op: "≤", limit: 1 },
            },
          ],
    ),
};
