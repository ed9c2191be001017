import { Rollcall } from "../src/index.js";
import { HEARTBEAT_BATCH } from "../src/engine/rollcall.js";
import { roster } from "../src/engine/scripts/roster.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { forEachInFlight } from "./drive.js";
import { number, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import type { Lab } from "./lab.js";
import { members, STEADY } from "./population.js";
import type { Progress } from "./progress.js";
import type { Row, Section } from "./section.js";
import { histogram, micros, percentiles, serverLatency, type Percentiles } from "./stats.js";

/** Full roster reads of rooms of each size; roster() beside ZRANGE of `compareMembers`. */
export interface RosterProfile {
  roomSizes: number[];
  reads: number;
  /** Members read, untimed, before each room's timed reads: a server reads rosters all day, so
   * what is timed is the decode once V8 has optimised it, not its first calls. */
  warmMembers: number;
  compareMembers: number;
  samples: number;
}

export interface RosterRow {
  roomSize: number;
  /** Pages one full read takes (rosterLimit members each). */
  pages: number;
  calls: number;
  /** Redis's time in the roster's transactions (MULTI and EXEC: the script and the native read
   * of the records) per listed member, µs (INFO commandstats). */
  redisUsPerMember: number;
  /** The same per call (per page), µs. */
  redisUsPerCall: number;
  /** The longest single transaction (EXEC) and the median, µs (INFO latencystats). */
  worstCallUs: number;
  p50CallUs: number;
  /** This process's CPU per listed member, decoding included, µs. */
  clientUsPerMember: number;
  /** Of which the decoding of the pages' replies into members, µs per member. */
  decodeUsPerMember: number;
  /** A full read (every page), call to reply, µs. */
  us: Percentiles;
}

export interface RosterResults {
  rows: RosterRow[];
  /** Members read untimed before each room's timed reads (the profile's). */
  warmMembers: number;
  /** Round trips side by side, one sequential client each: roster() of a room of `members`, and
   * ZRANGE … WITHSCORES of the baseline's sorted set of as many members. */
  compare: { members: number; roster: Percentiles; zrange: Percentiles };
}

function rosterSteps(p: RosterProfile): number {
  return p.roomSizes.length + 2;
}

/** What reading a roster costs Redis and the client, by room size, and beside a ZRANGE. */
async function benchRoster(
  lab: Lab,
  profile: RosterProfile,
  progress: Progress,
): Promise<RosterResults> {
  const { roomSizes, reads, warmMembers, compareMembers, samples } = profile;
  await lab.flush();
  const client = lab.connect();
  const rollcall = new Rollcall(client, STEADY);
  const rows: RosterRow[] = [];
  for (const roomSize of roomSizes) {
    rows.push(
      await progress.step(`roster: a room of ${number(roomSize)}`, async () => {
        const room = await fill(rollcall, `roster-${roomSize}`, roomSize);
        await lab.dropReplies();
        // The script loaded on this connection (EVALSHA after), and the decode warmed.
        for (let warmed = 0; warmed < Math.max(roomSize, warmMembers); warmed += roomSize) {
          await rollcall.rosterPages(room);
        }
        const h = histogram();
        const decoding = timeDecode();
        const cpu = process.cpuUsage();
        const [pages, latency] = await serverLatency(
          lab.admin,
          "exec",
          async () => {
            let pages = 0;
            for (let i = 0; i < reads; i++) {
              const started = performance.now();
              const read = await rollcall.rosterPages(room);
              h.recordValue(micros(started));
              const listed = read.reduce((sum, page) => sum + page.members.length, 0);
              if (listed !== roomSize) throw new Error(`a roster of ${roomSize} listed ${listed}`);
              pages = read.length;
            }
            return pages;
          },
          ["multi"],
        );
        const used = process.cpuUsage(cpu);
        const decodeMs = decoding.stop();
        const listed = reads * roomSize;
        return {
          roomSize,
          pages,
          calls: latency.calls,
          redisUsPerMember: latency.usec / listed,
          redisUsPerCall: latency.usec / latency.calls,
          worstCallUs: latency.max,
          p50CallUs: latency.p50,
          clientUsPerMember: (used.user + used.system) / listed,
          decodeUsPerMember: (decodeMs * 1000) / listed,
          us: percentiles(h),
        };
      }),
    );
  }
  const compare = await progress.step(
    `roster: ${compareMembers} members, roster() beside ZRANGE`,
    async () => {
      const room = await fill(rollcall, "compare", compareMembers);
      const tracker = new NaiveTracker(client, STEADY.presenceWindowMs! / 1000);
      const population = members(1, compareMembers, "compare");
      await forEachInFlight(population, 64, (m) => tracker.updatePresence(m.room, m.user));
      const key = tracker.presenceKey(room);
      const timed = {
        roster: { h: histogram(), read: () => rollcall.roster(room) },
        zrange: { h: histogram(), read: () => client.call("ZRANGE", key, "0", "-1", "WITHSCORES") },
      };
      // Alternated call by call, so that drift on the host hits both alike.
      for (let i = 0; i < samples; i++) {
        for (const t of Object.values(timed)) {
          const started = performance.now();
          await t.read();
          t.h.recordValue(micros(started));
        }
      }
      return {
        members: compareMembers,
        roster: percentiles(timed.roster.h),
        zrange: percentiles(timed.zrange.h),
      };
    },
  );
  lab.release(client);
  await progress.step("roster: flush", () => lab.flush());
  return { rows, warmMembers, compare };
}

/** Times roster's decode (the records' reply into members) until stopped: total ms. */
function timeDecode(): { stop(): number } {
  const original = Object.getOwnPropertyDescriptor(roster, "decode")!;
  let ms = 0;
  roster.decode = (reply, input) => {
    const started = performance.now();
    try {
      return (original.value as typeof roster.decode)(reply, input);
    } finally {
      ms += performance.now() - started;
    }
  };
  return {
    stop: () => {
      Object.defineProperty(roster, "decode", original);
      return ms;
    },
  };
}

/**
 * `size` members in one room (named after `name`), one connection each, in batches as a gateway
 * sends them. Returns the room.
 */
async function fill(rollcall: Rollcall, name: string, size: number): Promise<string> {
  const population = members(1, size, name);
  const batches = Array.from({ length: Math.ceil(size / HEARTBEAT_BATCH) }, (_, i) =>
    population.slice(i * HEARTBEAT_BATCH, (i + 1) * HEARTBEAT_BATCH),
  );
  await forEachInFlight(batches, 4, (batch) => rollcall.heartbeatMany(batch));
  return population[0]!.room;
}

function rosterSection({ rows, warmMembers, compare }: RosterResults): string {
  return [
    "## Roster reads",
    "",
    "One room of each size, every member present; each read takes every page (`rosterPages`, " +
      "`rosterLimit` 1,000 members a page), one sequential client. Each page is one MULTI: a " +
      "small script reads what the page is consistent with (epoch, seq, count, time), then a " +
      "plain HGETALL of the room's hash, or of a few of its 32 shards from 1,024 members (an " +
      "HSCAN for a room read for the first time), returns the records as stored, and the " +
      "client decodes them. The timed reads of each room follow untimed ones (at least one " +
      `read and ${number(warmMembers)} members per room), as a server that reads rosters all ` +
      "day has them optimised: the first calls of a process decode several times slower. " +
      "*Redis µs per member*: the transactions' time (INFO commandstats: EXEC, which counts " +
      "the commands inside it, and MULTI) over every member listed, and *per call* the same " +
      "per page; *worst call*: the longest single EXEC (INFO latencystats); *client*: this " +
      "process's CPU per member listed, " +
      "the call, the reply's parsing and the decoding; *decode*: the part of it spent turning " +
      "the pages' replies into members (roster's decode, timed).",
    "",
    table(
      [
        "room size",
        "pages",
        "Redis µs / member",
        "Redis µs / call",
        "call p50 µs",
        "worst call µs",
        "client µs / member",
        "decode µs / member",
        ...PERCENTILES.map((p) => `read ${p} µs`),
      ],
      rows.map((row) => [
        number(row.roomSize),
        number(row.pages),
        number(row.redisUsPerMember, 3),
        number(row.redisUsPerCall),
        number(row.p50CallUs),
        number(row.worstCallUs),
        number(row.clientUsPerMember, 2),
        number(row.decodeUsPerMember, 2),
        ...percentileCells(row.us),
      ]),
    ),
    "",
    `Beside it, alternated call by call: \`roster()\` of ${number(compare.members)} members ` +
      `p50 ${number(compare.roster.p50)} µs, a \`ZRANGE … WITHSCORES\` of the baseline's sorted ` +
      `set of as many p50 ${number(compare.zrange.p50)} µs ` +
      `(${ratio(compare.roster.p50 / compare.zrange.p50)}).`,
  ].join("\n");
}

/** Rooms from this size on are held to the roster's per-member target. */
const PER_MEMBER_FROM = 200;

function targets({ rows, compare }: RosterResults): Row[] {
  const worst = rows.reduce((a, b) => (b.worstCallUs > a.worstCallUs ? b : a));
  return [
    // A room of a few dozen costs what any call costs (its fixed part, a column of its own):
    // the per-member target is for the rooms whose members dominate.
    ...rows
      .filter((row) => row.roomSize >= PER_MEMBER_FROM)
      .map((row): Row => ({
        name: `roster, Redis time per listed member ≤ 0.3 µs, a room of ${number(row.roomSize)}`,
        value: row.redisUsPerMember,
        unit: "µs",
        digits: 3,
        note: `client ${number(row.clientUsPerMember, 2)} µs per member`,
        target: { op: "≤", limit: 0.3 },
      })),
    ...rows.map((row): Row => ({
      name: `roster, the client's decode ≤ 1 µs per member, a room of ${number(row.roomSize)}`,
      value: row.decodeUsPerMember,
      unit: "µs per member",
      digits: 2,
      note: `the whole call ${number(row.clientUsPerMember, 2)} µs of client CPU per member`,
      target: { op: "≤", limit: 1 },
    })),
    {
      name: "roster, no single call above 1 ms of Redis time (pages)",
      value: worst.worstCallUs,
      unit: "µs",
      note: `worst, a room of ${number(worst.roomSize)}`,
      target: { op: "≤", limit: 1_000 },
    },
    {
      name: `roster() of ${number(compare.members)} members ≤ 1.5× the p50 of a ZRANGE of as many`,
      value: compare.roster.p50 / compare.zrange.p50,
      unit: "×",
      digits: 2,
      note: `${number(compare.roster.p50)} µs vs ${number(compare.zrange.p50)} µs`,
      target: { op: "≤", limit: 1.5 },
    },
  ];
}

/** Full roster reads by room size, and roster() beside a ZRANGE. */
export const rosterReads: Section<RosterProfile, RosterResults> = {
  name: "roster",
  profiles: {
    full: {
      roomSizes: [20, 200, 1_000, 10_000],
      reads: 50,
      warmMembers: 20_000,
      compareMembers: 200,
      samples: 2_000,
    },
    smoke: {
      roomSizes: [20, 200, 1_000, 2_500],
      reads: 3,
      warmMembers: 0,
      compareMembers: 200,
      samples: 50,
    },
  },
  steps: rosterSteps,
  run: benchRoster,
  report: rosterSection,
  rows: targets,
};
