import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import type { Redis } from "ioredis";
import { Rollcall } from "../src/index.js";
import { REPLAY_GENERATION } from "../src/engine/layout.js";
import { loadScripts } from "../src/engine/loader.js";
import { STATUS_LIMIT } from "../src/engine/users.js";
import type { Expected } from "./benchmark.js";
import { captureEvalsha, DEPLOYMENT, makeSteady, STEADY_HEARTBEAT } from "./ceiling.js";
import { forEachInFlight } from "./drive.js";
import { number, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import type { Lab } from "./lab.js";
import { grid, padded, STEADY } from "./population.js";
import type { Progress } from "./progress.js";
import { measured } from "./report.js";
import { met, type Row, type Section } from "./section.js";
import {
  commandsBetween,
  commandStats,
  info,
  histogram,
  median,
  micros,
  percentiles,
  resetStats,
  serverLatency,
  underLoad,
  type Load,
  type Percentiles,
} from "./stats.js";

/**
 * Issue 28's rows (users, not only rooms): what the users' status costs the room paths, against
 * the scripts of the commit before it, side by side in the run; what a status() read of the most
 * users it takes costs; and how fast a bucket's user changes are applied.
 */

/** The commit before the users' status: its lua/ is the baseline of the room paths. */
export const BEFORE_USERS = "085ca76";

const exec = promisify(execFile);

/** The scripts as they were before the users' status, and as they are. */
export const VERSIONS = ["before", "after"] as const;
export type Version = (typeof VERSIONS)[number];

export interface UsersProfile {
  /** Steady heartbeats in R rooms of R steady users for each R: `calls` of each version, the
   * versions taking `chunk` calls in turn. */
  steady: { roomSizes: number[]; calls: number; chunk: number };
  /** A join, then a leave, in each of `rooms` rooms of roomSize - 1 present users, `cycles`
   * times; the two versions take `chunk` rooms in turn. */
  paths: { roomSize: number; rooms: number; chunk: number; cycles: number };
  /** status() of STATUS_LIMIT users, one sequential client, in rounds alternating with a PING. */
  status: { samples: number; rounds: number; warmup: number };
  /** `joins` users join rooms of `roomSize` in one bucket, then leave: twice as many changes. */
  apply: { joins: number; roomSize: number };
  /** `users` users online, one connection each, in rooms of `roomSize`: what their status keeps. */
  memory: { users: number; roomSize: number };
}

/** One path's Redis time, before and after, measured in turns. */
export interface PathCost {
  path: "steady heartbeat" | "join" | "leave" | "join, userStatus off" | "leave, userStatus off";
  roomSize: number;
  /** Calls of each version, and the turns they took. */
  calls: number;
  turns: number;
  /** Redis time per call of each version over all its turns, µs (INFO commandstats). */
  us: Record<Version, number>;
  /** after ÷ before of each pair of turns (run one after the other): quartiles. */
  ratio: { p25: number; p50: number; p75: number };
}

export interface StatusResult {
  users: number;
  buckets: number;
  online: number;
  offline: number;
  neverSeen: number;
  /** Call to reply, µs, one sequential client; a PING on its own connection for scale. */
  us: Percentiles;
  ping: Percentiles;
  /** The MGETs in Redis: calls, time (INFO commandstats) and Redis's own percentiles, µs. */
  mget: { calls: number; usec: number; p50: number; p99: number };
}

export interface ApplyResult {
  changes: number;
  transitions: number;
  seconds: number;
  /** Users script calls, and their Redis time (the commands they ran included), µs. */
  scriptCalls: number;
  scriptUsec: number;
  /** Redis time of every command the drain sent (the script, XRANGE, XTRIM), µs. */
  sentUsec: number;
  /** Calls per change of every command Redis ran, the script's own included. */
  byCommand: Record<string, number>;
  load: Load;
}

export interface UsersResults {
  baseline: string;
  /** The steady heartbeat, then the join and the leave. */
  paths: PathCost[];
  status: StatusResult;
  apply: ApplyResult;
  /** Bytes of Redis memory (INFO used_memory) the status of one online user takes. */
  bytesPerUser: { users: number; roomSize: number; bytes: number };
}

/** The connection every member of the section beats on. */
const CONNECTION = "c1";

/** Redis's SHA of each script the section sends itself, before and after. */
type Shas = Record<"heartbeat" | "leave", Record<Version, string>>;

/**
 * The scripts of lua/ at a commit (git archive, into a directory removed after reading), expanded
 * by today's loader (the format of lua/ it reads has not changed since).
 */
async function scriptsAt(commit: string) {
  const dir = await mkdtemp(join(tmpdir(), "rollcall-bench-lua-"));
  try {
    const tar = join(dir, "lua.tar");
    const repo = new URL("..", import.meta.url);
    await exec("git", ["archive", "--format=tar", "-o", tar, commit, "lua"], { cwd: repo }).catch(
      (error: unknown) => {
        throw new Error(`the baseline's scripts are lua/ at ${commit}: git archive failed`, {
          cause: error,
        });
      },
    );
    await exec("tar", ["-xf", tar, "-C", dir]);
    return loadScripts(pathToFileURL(join(dir, "lua/")));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Loads both versions of the heartbeat and leave scripts into Redis's script cache. */
async function loadVersions(lab: Lab): Promise<Shas> {
  const sources = { before: await scriptsAt(BEFORE_USERS), after: loadScripts() };
  const load = async (name: "heartbeat" | "leave") => {
    const sha = async (version: Version) => {
      const script = sources[version].get(name);
      if (!script) throw new Error(`no lua/${name}-N.lua ${version} the users' status`);
      return (await lab.admin.script("LOAD", script.lua)) as string;
    };
    return { before: await sha("before"), after: await sha("after") };
  };
  return { heartbeat: await load("heartbeat"), leave: await load("leave") };
}

/**
 * A call the engine sent (captured EVALSHA), sent again for another room and user, under a new
 * call number, to either version of its script: what the engine would send, without what it does
 * around the call (a transition's drain of user changes, measured on its own).
 */
class Template {
  private readonly at: { room: number; user: number; call: number };

  constructor(
    private readonly args: readonly string[],
    room: string,
    user: string,
    private readonly shas: Record<Version, string>,
  ) {
    const once = (value: string) => {
      const at = args.indexOf(value);
      if (at < 0 || args.lastIndexOf(value) !== at) {
        throw new Error(`cannot find ${value} once in the command ${args.join(" ")}`);
      }
      return at;
    };
    if (args[1] !== shas.after) throw new Error(`captured ${args[1]}, not the script loaded`);
    // ARGV[2], the call's number (lua/include/bucket.lua): after EVALSHA, the SHA, the key count
    // and the keys.
    const call = 3 + Number(args[2]) + 1;
    if (!/^\d+$/.test(args[call] ?? "")) throw new Error(`no call number in ${args.join(" ")}`);
    this.at = { room: once(room), user: once(user), call };
  }

  /** The call's number: the captured one when none is given (a steady heartbeat keeps no reply). */
  command(version: Version, room: string, user: string, call?: number): string[] {
    const args = [...this.args];
    args[1] = this.shas[version];
    args[this.at.room] = room;
    args[this.at.user] = user;
    if (call !== undefined) args[this.at.call] = String(call);
    return args.slice(1);
  }
}

/**
 * Call numbers for Templates: from REPLAY_GENERATION on, above any the engine gives within a
 * generation, so that each call is a first run (a number kept already would be a resend). Replies
 * are kept under 2-byte numbers.
 */
function callNumbers(): () => number {
  let next = REPLAY_GENERATION;
  return () => {
    if (next > 0xffff) throw new Error("out of call numbers");
    return next++;
  };
}

/**
 * The commands of a present member's refresh and of an absent connection's leave: a join's and a
 * leave's but for the room and the user, and neither starts a drain that would run on while the
 * monitor listens. Each runs once first: a connection's first call of a script sends its source.
 */
async function captureQuiet(
  lab: Lab,
  refresh: () => Promise<unknown>,
  absentLeave: () => Promise<unknown>,
): Promise<[string[], string[]]> {
  await refresh();
  await absentLeave();
  return [await captureEvalsha(lab, refresh), await captureEvalsha(lab, absentLeave)];
}

function send(client: Redis, command: readonly string[]): Promise<unknown> {
  return client.call("EVALSHA", ...command);
}

/** One turn of each version: its calls and their Redis time, µs. */
type Turn = Record<Version, { calls: number; usec: number }>;

/**
 * Calls 0 … count - 1, the versions taking `chunk` of them in turn (which goes first turning),
 * each chunk timed by Redis alone (INFO commandstats), after a full collection of the Lua heap
 * (no chunk pays for the garbage of the other version's). Turns close together meet the same
 * load on a noisy host; their pairs show how much it moved. With `expected`, every command a
 * chunk ran is checked against what each call must run.
 */
async function inTurns(
  lab: Lab,
  { count, chunk, expected }: { count: number; chunk: number; expected?: Expected },
  call: (version: Version, i: number) => Promise<unknown>,
): Promise<Turn[]> {
  const turns: Turn[] = [];
  for (let round = 0; round * 2 * chunk < count; round++) {
    const pair: Partial<Turn> = {};
    for (const [k, version] of turn(VERSIONS, round).entries()) {
      const from = (2 * round + k) * chunk;
      const calls = Array.from(
        { length: Math.max(0, Math.min(chunk, count - from)) },
        (_, j) => from + j,
      );
      if (calls.length === 0) continue;
      await lab.collectLuaGarbage();
      await resetStats(lab.admin);
      await forEachInFlight(calls, 32, (i) => call(version, i));
      const stats = await commandStats(lab.admin);
      const stat = stats.get("evalsha");
      if (stat?.calls !== calls.length || stat.failed > 0) {
        throw new Error(`${version}: evalsha ${JSON.stringify(stat)} for ${calls.length} calls`);
      }
      if (expected) checkRan(stats, expected, calls.length, version);
      pair[version] = { calls: stat.calls, usec: stat.usec };
    }
    if (pair.before && pair.after) turns.push(pair as Turn);
  }
  return turns;
}

/** Every command a turn ran besides its calls (EVALSHA) is one each of them had to run. */
function checkRan(
  stats: ReadonlyMap<string, { calls: number }>,
  expected: Expected,
  calls: number,
  version: Version,
): void {
  for (const [name, { calls: n }] of stats) {
    if (name === "evalsha" || name.startsWith("config|")) continue;
    if (n !== (expected[name] ?? 0) * calls) {
      throw new Error(`${version}: ${name} ran ${n} times in ${calls} calls`);
    }
  }
}

/** The items, starting at the `by`-th (what goes first turns with each round). */
function turn<T>(items: readonly T[], by: number): T[] {
  const at = by % items.length;
  return [...items.slice(at), ...items.slice(0, at)];
}

function compare(path: PathCost["path"], roomSize: number, turns: readonly Turn[]): PathCost {
  const total = (version: Version) =>
    turns.reduce(
      (sum, t) => ({ calls: sum.calls + t[version].calls, usec: sum.usec + t[version].usec }),
      { calls: 0, usec: 0 },
    );
  const [before, after] = [total("before"), total("after")];
  const ratios = turns
    .map((t) => t.after.usec / t.after.calls / (t.before.usec / t.before.calls))
    .sort((a, b) => a - b);
  const at = (q: number) => ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))]!;
  return {
    path,
    roomSize,
    calls: Math.min(before.calls, after.calls),
    turns: turns.length,
    us: { before: before.usec / before.calls, after: after.usec / after.calls },
    ratio: { p25: at(0.25), p50: median(ratios, (r) => r), p75: at(0.75) },
  };
}

async function benchUsers(
  lab: Lab,
  profile: UsersProfile,
  progress: Progress,
): Promise<UsersResults> {
  const shas = await progress.step(`users: lua/ at ${BEFORE_USERS} and now`, () =>
    loadVersions(lab),
  );
  const steady = await steadyBeforeAfter(lab, profile.steady, shas, progress);
  await lab.flush();
  const paths = await progress.step("users: join and leave, before and after", () =>
    joinLeaveBeforeAfter(lab, profile.paths, shas, true),
  );
  await lab.flush();
  // A deployment without userStatus runs the same scripts, less the user changes.
  paths.push(
    ...(await progress.step("users: join and leave without userStatus, before and after", () =>
      joinLeaveBeforeAfter(lab, profile.paths, shas, false),
    )),
  );
  await lab.flush();
  const status = await statusReads(lab, profile.status, progress);
  await lab.flush();
  const apply = await applyChanges(lab, profile.apply, shas, progress);
  await lab.flush();
  const bytesPerUser = await progress.step("users: memory of online users' status", () =>
    statusMemory(lab, profile.memory),
  );
  return { baseline: BEFORE_USERS, paths: [...steady, ...paths], status, apply, bytesPerUser };
}

/**
 * What the status of online users keeps in Redis: used_memory with every user online and their
 * changes applied, less used_memory once their status keys (`:p:` and `:q:`) are deleted.
 */
async function statusMemory(
  lab: Lab,
  { users, roomSize }: UsersProfile["memory"],
): Promise<UsersResults["bytesPerUser"]> {
  const client = lab.connect({ enableAutoPipelining: true });
  const rollcall = new Rollcall(client, { ...STEADY, userStatus: true, prefix: "users-memory" });
  const members = Array.from({ length: users }, (_, i) => ({
    room: padded("r", Math.floor(i / roomSize)),
    user: padded("u", i),
    connection: CONNECTION,
  }));
  for (let i = 0; i < members.length; i += 1_000) {
    await rollcall.heartbeatMany(members.slice(i, i + 1_000));
  }
  const buckets = Array.from({ length: rollcall.settings.buckets }, (_, b) => b);
  await Promise.all(buckets.map((b) => rollcall.applyUserChanges(b)));
  const used = async () => Number((await info(lab.admin, "memory")).get("used_memory"));
  const withStatus = await used();
  const statusKeys = members.flatMap(({ user }) => {
    const key = rollcall.layout.userStatus(user);
    return [key, key.replace(/:p:/, ":q:")];
  });
  for (let i = 0; i < statusKeys.length; i += 1_000) {
    const batch = statusKeys.slice(i, i + 1_000);
    if ((await lab.admin.del(...batch)) !== batch.length) {
      throw new Error("an online user's status keys were not all there");
    }
  }
  const bytes = (withStatus - (await used())) / users;
  lab.release(client);
  return { users, roomSize, bytes };
}

/**
 * The steady heartbeat, R rooms of R steady users in one bucket (as the heartbeat section's
 * ceiling): every member beaten in turn, each call checked to run exactly a steady heartbeat's
 * commands.
 */
async function steadyBeforeAfter(
  lab: Lab,
  { roomSizes, calls, chunk }: UsersProfile["steady"],
  shas: Shas,
  progress: Progress,
): Promise<PathCost[]> {
  const client = lab.connect({ enableAutoPipelining: true });
  const costs: PathCost[] = [];
  for (const roomSize of roomSizes) {
    await progress.step(`users: steady heartbeat, rooms of ${roomSize}`, async () => {
      const present = grid(roomSize, roomSize);
      const rollcall = new Rollcall(client, {
        ...DEPLOYMENT,
        userStatus: true,
        prefix: `users-steady${roomSize}`,
      });
      await makeSteady(lab, rollcall, present);
      // The joins' drains end before anything is timed.
      await rollcall.applyUserChanges(0);
      const { room, user, connection } = present[0]!;
      const captured = await captureEvalsha(lab, () => rollcall.heartbeat(room, user, connection));
      const beat = new Template(captured, room, user, shas.heartbeat);
      const turns = await inTurns(
        lab,
        { count: 2 * calls, chunk, expected: STEADY_HEARTBEAT },
        (version, i) => {
          const m = present[i % present.length]!;
          return send(client, beat.command(version, m.room, m.user));
        },
      );
      costs.push(compare("steady heartbeat", roomSize, turns));
    });
  }
  lab.release(client);
  return costs;
}

/**
 * A join, then a leave, of one more user in each room, each version taking `chunk` rooms in turn,
 * and again for each cycle: each script's Redis time on the path, now and before.
 */
async function joinLeaveBeforeAfter(
  lab: Lab,
  { roomSize, rooms, chunk, cycles }: UsersProfile["paths"],
  shas: Shas,
  userStatus: boolean,
): Promise<PathCost[]> {
  const client = lab.connect({ enableAutoPipelining: true });
  const prefix = userStatus ? "users-paths" : "users-paths-off";
  const rollcall = new Rollcall(client, { ...DEPLOYMENT, userStatus, prefix });
  const room = (i: number) => padded("r", i);
  const others = Array.from({ length: rooms * (roomSize - 1) }, (_, i) => ({
    room: room(Math.floor(i / (roomSize - 1))),
    user: padded("u", i % (roomSize - 1)),
  }));
  await forEachInFlight(others, 64, (m) => rollcall.heartbeat(m.room, m.user, CONNECTION));
  await rollcall.applyUserChanges(0);
  const [member, joiner] = [padded("u", 0), "joiner"];
  const [beat, leave] = await captureQuiet(
    lab,
    () => rollcall.heartbeat(room(0), member, CONNECTION),
    () => rollcall.leave(room(0), joiner, CONNECTION),
  );
  const next = callNumbers();
  const paths: { name: "join" | "leave"; template: Template; members: number; turns: Turn[] }[] = [
    {
      name: "join",
      template: new Template(beat, room(0), member, shas.heartbeat),
      members: roomSize,
      turns: [],
    },
    {
      name: "leave",
      template: new Template(leave, room(0), joiner, shas.leave),
      members: roomSize - 1,
      turns: [],
    },
  ];
  for (let cycle = 0; cycle < cycles; cycle++) {
    for (const { name, template, members, turns } of paths) {
      turns.push(
        ...(await inTurns(lab, { count: rooms, chunk }, (version, i) =>
          send(client, template.command(version, room(i), joiner, next())),
        )),
      );
      await forEachInFlight(
        Array.from({ length: rooms }, (_, i) => room(i)),
        64,
        async (r) => {
          const { users } = await rollcall.count(r);
          if (users !== members) {
            throw new Error(`${name}: ${r} holds ${users} members, not ${members}`);
          }
        },
      );
    }
  }
  lab.release(client);
  return paths.map(({ name, turns }) =>
    compare(userStatus ? name : `${name}, userStatus off`, roomSize, turns),
  );
}

/** Half the users online, three in ten offline with a last-seen time, the rest never seen. */
function statusPopulation(): { online: string[]; offline: string[]; neverSeen: string[] } {
  const users = Array.from({ length: STATUS_LIMIT }, (_, i) => `user-${i}`);
  const online = users.length / 2;
  const offline = online + Math.round(users.length * 0.3);
  return {
    online: users.slice(0, online),
    offline: users.slice(online, offline),
    neverSeen: users.slice(offline),
  };
}

/** status() of STATUS_LIMIT users: call to reply, and the MGET's time in Redis per user. */
async function statusReads(
  lab: Lab,
  { samples, rounds, warmup }: UsersProfile["status"],
  progress: Progress,
): Promise<StatusResult> {
  const client = lab.connect();
  const rollcall = new Rollcall(client, { ...STEADY, userStatus: true, prefix: "users-status" });
  const { online, offline, neverSeen } = statusPopulation();
  const users = [...online, ...offline, ...neverSeen];
  await progress.step("users: status population", async () => {
    const roomOf = (i: number) => `room-${Math.floor(i / 5)}`;
    const seen = [...online, ...offline];
    await forEachInFlight([...seen.keys()], 32, (i) =>
      rollcall.heartbeat(roomOf(i), seen[i]!, CONNECTION),
    );
    await forEachInFlight([...offline.keys()], 32, (i) =>
      rollcall.leave(roomOf(online.length + i), offline[i]!, CONNECTION),
    );
    const buckets = Array.from({ length: rollcall.settings.buckets }, (_, b) => b);
    await Promise.all(buckets.map((b) => rollcall.applyUserChanges(b)));
    const statuses = await rollcall.status(users);
    const found = {
      online: statuses.filter((s) => s.online).length,
      offline: statuses.filter((s) => !s.online && s.lastSeenAt !== null).length,
      neverSeen: statuses.filter((s) => !s.online && s.lastSeenAt === null).length,
    };
    const expected = {
      online: online.length,
      offline: offline.length,
      neverSeen: neverSeen.length,
    };
    if (JSON.stringify(found) !== JSON.stringify(expected)) {
      throw new Error(`status found ${JSON.stringify(found)}, not ${JSON.stringify(expected)}`);
    }
  });
  const ping = lab.connect();
  const runners = [
    { call: () => rollcall.status(users), h: histogram() },
    { call: () => ping.ping(), h: histogram() },
  ];
  for (const r of runners) for (let i = 0; i < warmup; i++) await r.call();
  const [, mget] = await serverLatency(lab.admin, "mget", async () => {
    for (let round = 0; round < rounds; round++) {
      await progress.step(`users: status of ${users.length}, ${round + 1}/${rounds}`, async () => {
        for (const r of runners) {
          for (let i = 0; i < samples / rounds; i++) {
            const started = performance.now();
            await r.call();
            r.h.recordValue(micros(started));
          }
        }
      });
    }
  });
  lab.release(ping);
  lab.release(client);
  return {
    users: users.length,
    buckets: rollcall.settings.buckets,
    online: online.length,
    offline: offline.length,
    neverSeen: neverSeen.length,
    us: percentiles(runners[0]!.h),
    ping: percentiles(runners[1]!.h),
    mget: { calls: mget.calls, usec: mget.usec, p50: mget.p50, p99: mget.p99 },
  };
}

/** Rooms of one bucket: `room-<i>` for the first i that fall in it. */
function roomsIn(rollcall: Rollcall, bucket: number, count: number): string[] {
  const rooms: string[] = [];
  for (let i = 0; rooms.length < count; i++) {
    if (rollcall.bucketOf(`room-${i}`) === bucket) rooms.push(`room-${i}`);
  }
  return rooms;
}

/**
 * A bucket's stream filled with `joins` joins, then as many leaves, of distinct users (every
 * change a transition, spread over the users' buckets), sent as the engine's calls but with no
 * drain; then one applyUserChanges, timed.
 */
async function applyChanges(
  lab: Lab,
  { joins, roomSize }: UsersProfile["apply"],
  shas: Shas,
  progress: Progress,
): Promise<ApplyResult> {
  const client = lab.connect({ enableAutoPipelining: true });
  const rollcall = new Rollcall(client, { ...STEADY, userStatus: true, prefix: "users-apply" });
  const bucket = 0;
  const stream = rollcall.layout.userChanges(bucket);
  const rooms = roomsIn(rollcall, bucket, Math.ceil(joins / roomSize));
  const users = Array.from({ length: joins }, (_, i) => `user-${i}`);
  const roomOf = (i: number) => rooms[Math.floor(i / roomSize)]!;
  await progress.step(`users: ${number(2 * joins)} user changes in a bucket`, async () => {
    const [member, absent] = ["member", "absent"];
    await rollcall.heartbeat(rooms[0]!, member, CONNECTION);
    await rollcall.applyUserChanges(bucket);
    const [beat, leave] = await captureQuiet(
      lab,
      () => rollcall.heartbeat(rooms[0]!, member, CONNECTION),
      () => rollcall.leave(rooms[0]!, absent, CONNECTION),
    );
    const next = callNumbers();
    for (const template of [
      new Template(beat, rooms[0]!, member, shas.heartbeat),
      new Template(leave, rooms[0]!, absent, shas.leave),
    ]) {
      await forEachInFlight([...users.keys()], 64, (i) =>
        send(client, template.command("after", roomOf(i), users[i]!, next())),
      );
    }
    const pending = await lab.admin.xlen(stream);
    if (pending !== 2 * joins) {
      throw new Error(`${stream} holds ${pending} changes, not ${2 * joins}`);
    }
  });
  return progress.step("users: applyUserChanges", async () => {
    await lab.collectLuaGarbage();
    const before = await commandStats(lab.admin);
    const [transitions, load] = await underLoad(lab.admin, () => rollcall.applyUserChanges(bucket));
    const ran = commandsBetween(before, await commandStats(lab.admin));
    const left = await lab.admin.xlen(stream);
    if (transitions !== 2 * joins || left !== 0) {
      throw new Error(`applied ${transitions} transitions of ${2 * joins}, ${left} changes left`);
    }
    const usec = (name: string) => ran.get(name)?.usec ?? 0;
    const script = ran.get("evalsha");
    if (!script || script.failed > 0) throw new Error(`users script: ${JSON.stringify(script)}`);
    lab.release(client);
    return {
      changes: 2 * joins,
      transitions,
      seconds: load.seconds,
      scriptCalls: script.calls,
      scriptUsec: script.usec,
      sentUsec: usec("evalsha") + usec("eval") + usec("xrange") + usec("xtrim"),
      byCommand: Object.fromEntries(
        [...ran].map(([name, stat]) => [name, stat.calls / (2 * joins)]),
      ),
      load,
    };
  });
}

/** The section's limits (issue 28). */
const STEADY_GROWTH = 1.05;
const STATUS_P50_MS = 2;
const STATUS_REDIS_US_PER_USER = 1;

function rows(u: UsersResults): Row[] {
  const perUser = u.status.mget.usec / u.status.mget.calls / u.status.users;
  const { apply } = u;
  return [
    ...u.paths.map((p): Row => {
      const steady = p.path === "steady heartbeat";
      return {
        name:
          `${p.path}, Redis time per call${steady ? ` ≤ ${STEADY_GROWTH}×` : " against"} ` +
          `lua/ at ${u.baseline}'s, rooms of ${p.roomSize}`,
        value: p.ratio.p50,
        unit: "×",
        digits: 3,
        note:
          `${number(p.us.after, 2)} µs vs ${number(p.us.before, 2)} µs; turns' middle half ` +
          `${number(p.ratio.p25, 2)}-${number(p.ratio.p75, 2)}×`,
        ...(steady ? { target: { op: "≤" as const, limit: STEADY_GROWTH } } : {}),
      };
    }),
    {
      name: `status() of ${u.status.users} users, p50 ≤ ${STATUS_P50_MS} ms`,
      value: u.status.us.p50 / 1000,
      unit: "ms",
      digits: 3,
      note:
        `p99 ${number(u.status.us.p99 / 1000, 3)} ms; a PING's p50 ` +
        `${number(u.status.ping.p50 / 1000, 3)} ms`,
      target: { op: "≤", limit: STATUS_P50_MS },
    },
    {
      name: `status(), Redis time per user ≤ ${STATUS_REDIS_US_PER_USER} µs`,
      value: perUser,
      unit: "µs",
      digits: 3,
      note: `one MGET of ${u.status.users}: ${number(u.status.mget.usec / u.status.mget.calls, 1)} µs`,
      target: { op: "≤", limit: STATUS_REDIS_US_PER_USER },
    },
    {
      name: `applyUserChanges, changes applied per second, ${number(apply.changes)} in a bucket`,
      value: apply.changes / apply.seconds,
      unit: "/s",
      note: `${number(apply.seconds, 2)} s; redis-server CPU ${number(100 * apply.load.redisCpu)}%`,
    },
    {
      name: `online users' status, bytes of Redis per user (${number(u.bytesPerUser.users)} users, one connection each, rooms of ${u.bytesPerUser.roomSize})`,
      value: u.bytesPerUser.bytes,
      unit: "B",
      digits: 0,
      note: "INFO used_memory, less once their status keys are deleted",
    },
    {
      name: "users script, Redis time per change",
      value: apply.scriptUsec / apply.changes,
      unit: "µs",
      digits: 2,
      note:
        `${number(apply.changes / apply.scriptCalls, 1)} changes per call; with XRANGE and ` +
        `XTRIM ${number(apply.sentUsec / apply.changes, 2)} µs`,
    },
  ];
}

function targetCell(row: Row): string {
  if (!row.target) return "—";
  const unit = row.unit === "×" || row.unit === "%" ? row.unit : ` ${row.unit}`;
  return `${row.target.op} ${number(row.target.limit, 2)}${unit}`;
}

function report(u: UsersResults): string {
  const { status, apply } = u;
  return [
    "## Users' status (issue 28)",
    "",
    table(
      ["row", "target", "measured", "met?"],
      rows(u).map((row) => [
        row.name,
        targetCell(row),
        measured(row),
        row.target ? (met(row) ? "met" : "**not met**") : "—",
      ]),
    ),
    "",
    "### The room paths, before and after",
    "",
    `*before* is lua/ at ${u.baseline}, the commit before the users' status, loaded into the ` +
      "same Redis as lua/ of now. The calls are the engine's: captured (MONITOR) and sent again " +
      "for each member, to either version, from Node (32 in flight on one auto-pipelined " +
      "connection). *steady heartbeat*: every member of R rooms of R " +
      "steady users (one bucket) beaten in turn, each call checked to run exactly TIME, HMGET, " +
      "HSET. *join*, then *leave*: one more user in each of many rooms of R - 1 (with " +
      "userStatus, a transition now also writes its user change, XADD and PEXPIRE of the " +
      "bucket's stream; the drain that applies it is measured below); *userStatus off*: the " +
      "same in a deployment without it, which writes none. The versions take turns of calls, which goes first " +
      "turning, each turn timed alone (INFO commandstats, after a full collection of the Lua " +
      "heap): turns close together meet the same load on a noisy host. The ratio is the median " +
      "of the turns' pairs; the middle half of them shows how much the host moved.",
    "",
    table(
      [
        "path",
        "R",
        "calls of each",
        "turns",
        "before µs",
        "after µs",
        "after ÷ before",
        "middle half",
      ],
      u.paths.map((p) => [
        p.path,
        number(p.roomSize),
        number(p.calls),
        number(p.turns),
        number(p.us.before, 2),
        number(p.us.after, 2),
        ratio(p.ratio.p50),
        `${ratio(p.ratio.p25)}-${ratio(p.ratio.p75)}`,
      ]),
    ),
    "",
    `### status() of ${status.users} users`,
    "",
    `${status.online} online, ${status.offline} offline with a last-seen time, ` +
      `${status.neverSeen} never seen, in a deployment of ${status.buckets} buckets: one MGET. ` +
      "One sequential client, call to reply (µs), in rounds alternating with a PING on its own " +
      "connection.",
    "",
    table(
      ["call", ...PERCENTILES, "samples"],
      [
        ["status()", ...percentileCells(status.us), number(status.us.count)],
        ["PING, for scale", ...percentileCells(status.ping), number(status.ping.count)],
      ],
    ),
    "",
    `In Redis (INFO latencystats and commandstats): MGET p50 ${number(status.mget.p50)} µs, ` +
      `p99 ${number(status.mget.p99)} µs, ${number(status.mget.usec / status.mget.calls, 1)} µs ` +
      `per call over ${number(status.mget.calls)} calls.`,
    "",
    "### Applying user changes",
    "",
    `${number(apply.changes / 2)} users join rooms of one bucket, then leave (every change a ` +
      "transition, published), sent as the engine's calls but without their drains: the " +
      `bucket's stream holds ${number(apply.changes)} changes. Then one applyUserChanges: ` +
      `${number(apply.transitions)} transitions in ${number(apply.seconds, 2)} s, ` +
      `${number(apply.scriptCalls)} users script calls (each XRANGE batch's changes split by ` +
      "the users' buckets, one call each, in parallel). redis-server CPU " +
      `${number(100 * apply.load.redisCpu)}%, the bench ${number(100 * apply.load.clientCpu)}% ` +
      "of a core. Commands Redis ran per change (INFO commandstats, the script's own included): " +
      Object.entries(apply.byCommand)
        .map(([name, calls]) => `${name} ${number(calls, 2)}`)
        .join(", ") +
      ".",
  ].join("\n");
}

function steps(p: UsersProfile): number {
  return 1 + p.steady.roomSizes.length + 2 + 1 + p.status.rounds + 2 + 1;
}

/** Issue 28's rows: the room paths before and after the users' status, status(), the drain. */
export const users: Section<UsersProfile, UsersResults> = {
  name: "users",
  profiles: {
    full: {
      steady: { roomSizes: [5, 20], calls: 100_000, chunk: 1_000 },
      paths: { roomSize: 20, rooms: 2_000, chunk: 50, cycles: 4 },
      status: { samples: 5_000, rounds: 10, warmup: 200 },
      apply: { joins: 10_000, roomSize: 10 },
      memory: { users: 20_000, roomSize: 20 },
    },
    smoke: {
      steady: { roomSizes: [5], calls: 2_000, chunk: 500 },
      paths: { roomSize: 5, rooms: 40, chunk: 10, cycles: 1 },
      status: { samples: 60, rounds: 2, warmup: 10 },
      apply: { joins: 300, roomSize: 10 },
      memory: { users: 1_000, roomSize: 20 },
    },
  },
  steps,
  run: benchUsers,
  report,
  rows,
};
