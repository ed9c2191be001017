import { readdirSync, readFileSync } from "node:fs";
import { Rollcall } from "../src/index.js";
import { expandIncludes, includeReader, LUA_DIR } from "../src/engine/loader.js";
import { captureEvalsha, makeSteady } from "./ceiling.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { NAIVE_JOIN, NAIVE_LEAVE, NAIVE_TYPING, type TypingParts, typingFlat } from "./lua.js";
import { number, ratio, table } from "./format.js";
import { padded } from "./population.js";
import type { Progress } from "./progress.js";
import { commandStats, resetStats } from "./stats.js";
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
 * script's own path: Redis time per call, µs, whole and without each part of its work.
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
  const sha = (await lab.admin.script("LOAD", lua)) as string;
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
  lab.release(client);
  // The flat typing starts, by a member present since the rooms filled (the joiner left), with
  // the keys and arguments of the script's own call, room by room.
  const [, , keyCount, ...rest] = typing;
  const keys = rest.slice(0, Number(keyCount));
  const [settings] = rest.slice(keys.length);
  const calls = Array.from({ length: rooms }, (_, i) => [
    keyCount!,
    ...keys,
    settings!,
    String(1 + (i % 60_000)),
    room(i),
    padded("u", 0),
  ]);
  const flatUs = (parts: TypingParts) => scriptUs(lab, typingFlat(parts), calls);
  const without = {} as Record<keyof TypingParts, number>;
  const whole = await flatUs(WHOLE);
  for (const part of Object.keys(PARTS) as (keyof TypingParts)[]) {
    without[part] = await flatUs({ ...WHOLE, [part]: false });
  }
  const { us: script, naiveUs: naive } = costs.find((c) => c.script === "startTyping")!;
  return { costs, flat: { roomSize, script, flat: whole, naive: naive!, without } };
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
    "Where a transition's time goes: the typing start's work on its path (the same keys, " +
      "records, meta, event, mac and kept reply; 16 commands where the script runs 18) written " +
      "flat, with no helper, no decoded record and no module (bench/lua.ts, `typingFlat`), " +
      "measured as above on the same rooms; then the same without each part of its work, to " +
      "weigh the part. *Lua's structure* is the script's path less the flat script: what " +
      "restructuring the Lua could remove at most. What is left is what the commands cost, " +
      "beside the baseline's typing start scripted (above).",
    "",
    table(
      [
        "room size",
        "script µs",
        "flat µs",
        "Lua's structure µs",
        "flat ÷ baseline scripted",
        ...Object.values(PARTS).map((p) => `without ${p} µs`),
      ],
      s.flat.map((f) => [
        number(f.roomSize),
        number(f.script, 2),
        number(f.flat, 2),
        number(f.script - f.flat, 2),
        ratio(f.flat / f.naive),
        ...(Object.keys(PARTS) as (keyof TypingParts)[]).map((p) => number(f.without[p], 2)),
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
