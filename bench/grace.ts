import type { Redis } from "ioredis";
import { Rollcall, type RollcallOptions } from "../src/index.js";
import { benchmarkScript, type BenchmarkConfig } from "./benchmark.js";
import { captureHeartbeat, makeSteady, STEADY_HEARTBEAT } from "./ceiling.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { grid, members, STEADY, type Member } from "./population.js";
import type { Progress } from "./progress.js";
import { commandStats, commandsBetween, median, underLoad } from "./stats.js";
import { number, ratio, table } from "./format.js";
import type { Row, Section } from "./section.js";

/**
 * The leave grace and room capacity on the heartbeat path, with and without, side by side in one
 * run: (a, b) steady heartbeats under redis-benchmark,
 * as the ceiling runs them, in a deployment with a grace and with a capacity argument; (c) the
 * join of a newcomer into a room of 20 with a capacity and without, and refused from a full
 * room; (d) a page reload (leave, then a new connection) within the grace, against the same
 * without a grace.
 */

export interface GraceProfile {
  leaveGraceMs: number;
  /** The capacity of (b) and (c): rooms hold fewer, so every join gets in. */
  capacity: number;
  steady: BenchmarkConfig & { roomSize: number; repeats: number };
  /** (c) and (d): rooms of `roomSize`, one call per room per phase, `inFlight` at once. */
  paths: { rooms: number; roomSize: number; inFlight: number; phases: number };
}

export const STEADY_VARIANTS = ["plain", "grace", "capacity"] as const;
export type SteadyVariant = (typeof STEADY_VARIANTS)[number];

export interface SteadyRun {
  variant: SteadyVariant;
  repeat: number;
  /** Redis's time per EVALSHA (INFO commandstats), µs. */
  usPerCall: number;
  /** redis-server CPU per call over the run (used_cpu, I/O included), µs. */
  redisCpuUs: number;
  opsPerSec: number;
}

export interface SteadySummary {
  variant: SteadyVariant;
  /** Medians over the repeats, µs. */
  usPerCall: number;
  redisCpuUs: number;
  /** ÷ plain, median of each repeat's pair. */
  ratio: number;
  bestOpsPerSec: number;
}

export interface PathSummary {
  variant: string;
  /** A refusal from a full room. */
  refused: boolean;
  calls: number;
  /** Per call: Redis's time in EVALSHA, redis-server CPU, events published, writing commands. */
  scriptUs: number;
  redisCpuUs: number;
  events: number;
  writes: number;
  keptReplies: number;
}

export interface ReloadSummary {
  leaveGraceMs: number;
  reloads: number;
  /** Per reload, µs: the leave's script time, the new connection's, both, and Redis CPU. */
  leaveUs: number;
  rejoinUs: number;
  scriptUs: number;
  redisCpuUs: number;
  /** Events a reload published (SPUBLISH calls per reload). */
  events: number;
}

export interface GraceResults {
  leaveGraceMs: number;
  capacity: number;
  steady: {
    config: BenchmarkConfig;
    roomSize: number;
    commands: { variant: SteadyVariant; command: string[] }[];
    runs: SteadyRun[];
    summary: SteadySummary[];
  };
  join: { rooms: number; roomSize: number; variants: PathSummary[] };
  reload: { rooms: number; roomSize: number; variants: ReloadSummary[] };
}

function graceSteps(p: GraceProfile): number {
  return 3 + p.steady.repeats + 2 * p.paths.phases;
}

/** As the ceiling's: one bucket, nobody expires, no heartbeat crosses into a new TTL quarter. */
const ONE_BUCKET: RollcallOptions = {
  presenceWindowMs: 3_600_000,
  keyTtlMs: 30 * 86_400_000,
  buckets: 1,
};

async function benchGrace(
  lab: Lab,
  profile: GraceProfile,
  progress: Progress,
): Promise<GraceResults> {
  const g = profile;
  const steady = await steadyHeartbeats(lab, g, progress);
  const join = await joinPath(lab, g, progress);
  const reload = await reloads(lab, g, progress);
  await lab.flush();
  return { leaveGraceMs: g.leaveGraceMs, capacity: g.capacity, steady, join, reload };
}

/** (a) and (b): the steady heartbeat's command captured in each variant, run by redis-benchmark. */
async function steadyHeartbeats(
  lab: Lab,
  g: GraceProfile,
  progress: Progress,
): Promise<GraceResults["steady"]> {
  const { roomSize, repeats, ...config } = g.steady;
  const commands = await progress.step("grace: steady heartbeats, users", async () => {
    await lab.flush();
    const client = lab.connect({ enableAutoPipelining: true });
    const present = grid(roomSize, roomSize);
    const deploy = async (leaveGraceMs: number) => {
      const rollcall = new Rollcall(client, {
        ...ONE_BUCKET,
        leaveGraceMs,
        prefix: `steady-grace${leaveGraceMs}`,
      });
      await makeSteady(lab, rollcall, present);
      return rollcall;
    };
    const plain = await deploy(0);
    const graced = await deploy(g.leaveGraceMs);
    const commands: Record<SteadyVariant, string[]> = {
      plain: await captureHeartbeat(lab, plain, present[0]!),
      grace: await captureHeartbeat(lab, graced, present[0]!),
      capacity: await captureHeartbeat(lab, plain, present[0]!, { capacity: g.capacity }),
    };
    lab.release(client);
    await lab.dropReplies();
    return commands;
  });
  const runs: SteadyRun[] = [];
  for (let repeat = 0; repeat < repeats; repeat++) {
    await progress.step(`grace: steady heartbeats ${repeat + 1}/${repeats}`, async () => {
      for (let i = 0; i < STEADY_VARIANTS.length; i++) {
        const variant = STEADY_VARIANTS[(i + repeat) % STEADY_VARIANTS.length]!;
        const run = await benchmarkScript(
          lab,
          config,
          roomSize,
          commands[variant],
          STEADY_HEARTBEAT,
        );
        runs.push({
          variant,
          repeat,
          usPerCall: run.usPerCall,
          redisCpuUs: (run.load.redisCpu * run.load.seconds * 1e6) / config.requests,
          opsPerSec: run.opsPerSec,
        });
      }
    });
  }
  const at = (variant: SteadyVariant, repeat: number) =>
    runs.find((r) => r.variant === variant && r.repeat === repeat)!;
  const summary = STEADY_VARIANTS.map((variant) => {
    const of = runs.filter((r) => r.variant === variant);
    return {
      variant,
      usPerCall: median(of, (r) => r.usPerCall).usPerCall,
      redisCpuUs: median(of, (r) => r.redisCpuUs).redisCpuUs,
      ratio: median(
        of.map((r) => r.usPerCall / at("plain", r.repeat).usPerCall),
        (x) => x,
      ),
      bestOpsPerSec: Math.max(...of.map((r) => r.opsPerSec)),
    };
  });
  await lab.flush();
  return {
    config,
    roomSize,
    commands: STEADY_VARIANTS.map((variant) => ({ variant, command: commands[variant] })),
    runs,
    summary,
  };
}

interface Measured {
  calls: number;
  usec: number;
  events: number;
  /** Commands run that write presence (the scripts' only writes: see WRITES), the kept replies
   * apart. */
  writes: number;
  /** Replies kept for resends: an APPEND (and its PEXPIRE) per call that kept any. */
  keptReplies: number;
  cpuSeconds: number;
}

const NOTHING: Measured = {
  calls: 0,
  usec: 0,
  events: 0,
  writes: 0,
  keptReplies: 0,
  cpuSeconds: 0,
};

/** Every writing command rollcall's room scripts run. */
const WRITES = ["hset", "hdel", "hincrby", "set", "del", "zadd", "zrem", "pexpire", "xadd"];

function add(a: Measured, b: Measured): Measured {
  return {
    calls: a.calls + b.calls,
    usec: a.usec + b.usec,
    events: a.events + b.events,
    writes: a.writes + b.writes,
    keptReplies: a.keptReplies + b.keptReplies,
    cpuSeconds: a.cpuSeconds + b.cpuSeconds,
  };
}

/** Script calls, their time, the events they published and Redis's CPU over some work. */
async function measure<T>(lab: Lab, work: () => Promise<T>): Promise<[T, Measured]> {
  await lab.collectLuaGarbage();
  const before = await commandStats(lab.admin);
  const [result, load] = await underLoad(lab.admin, work);
  const ran = commandsBetween(before, await commandStats(lab.admin));
  const evalsha = ran.get("evalsha") ?? { calls: 0, usec: 0, failed: 0 };
  if (evalsha.failed > 0) throw new Error(`${evalsha.failed} script calls failed`);
  const events = ran.get("spublish")?.calls ?? 0;
  // A call that keeps replies runs one APPEND and one PEXPIRE of its replay string.
  const keptReplies = ran.get("append")?.calls ?? 0;
  const writes = WRITES.reduce((sum, name) => sum + (ran.get(name)?.calls ?? 0), -keptReplies);
  const cpuSeconds = load.redisCpu * load.seconds;
  return [
    result,
    { calls: evalsha.calls, usec: evalsha.usec, events, writes, keptReplies, cpuSeconds },
  ];
}

/** A deployment with its users present, its scripts loaded on the connection, replies dropped. */
async function deployment(
  lab: Lab,
  client: Redis,
  options: RollcallOptions,
  present: readonly Member[],
): Promise<Rollcall> {
  const rollcall = new Rollcall(client, options);
  await forEachInFlight(present, 64, (m) => rollcall.heartbeat(m.room, m.user, m.connection));
  // The connection's first call of each script is an EVAL: not in the measured phases.
  await rollcall.heartbeat("warm-up", "u", "c");
  await rollcall.leave("warm-up", "u", "c");
  await lab.dropReplies();
  return rollcall;
}

/** (c): a newcomer joins each room of 20, with no capacity, with one, and refused when full. */
async function joinPath(
  lab: Lab,
  g: GraceProfile,
  progress: Progress,
): Promise<GraceResults["join"]> {
  const { rooms, roomSize, inFlight, phases } = g.paths;
  const variants = [
    { name: "no capacity", capacity: undefined, full: false },
    { name: `capacity ${g.capacity}`, capacity: g.capacity, full: false },
    { name: `capacity ${roomSize}: the room is full, refused`, capacity: roomSize, full: true },
  ];
  const client = lab.connect({ enableAutoPipelining: true });
  const population = members(rooms, roomSize, "joins");
  const roomNames = [...new Set(population.map((m) => m.room))];
  const rollcall = await progress.step("grace: join path, rooms of 20", async () => {
    await lab.flush();
    return deployment(lab, client, { ...STEADY, prefix: "joins" }, population);
  });
  const totals = variants.map(() => NOTHING);
  for (let phase = 0; phase < phases; phase++) {
    await progress.step(`grace: join path ${phase + 1}/${phases}`, async () => {
      for (let k = 0; k < variants.length; k++) {
        const i = (k + phase) % variants.length;
        const v = variants[i]!;
        const user = `newcomer-${phase}`;
        const options = v.capacity === undefined ? {} : { capacity: v.capacity };
        const [results, ran] = await measure(lab, async () => {
          const results: { joined: boolean; full: boolean }[] = [];
          await forEachInFlight(roomNames, inFlight, async (room) => {
            results.push(await rollcall.heartbeat(room, user, "c", options));
          });
          // The joins' user changes, applied after them (users' status): part of their cost.
          await rollcall.applyUserChanges(0);
          return results;
        });
        const wrong = results.filter((r) => (v.full ? !r.full || r.joined : !r.joined || r.full));
        if (wrong.length > 0 || ran.calls < rooms) {
          throw new Error(`join path, ${v.name}: ${wrong.length} unexpected replies`);
        }
        // Per join made: the users script calls that applied them count towards the joins.
        const measured = { ...ran, calls: rooms };
        totals[i] = add(totals[i]!, measured);
        if (!v.full) {
          await forEachInFlight(roomNames, inFlight, (room) => rollcall.leave(room, user, "c"));
        }
        await lab.dropReplies();
      }
    });
  }
  lab.release(client);
  await lab.flush();
  return {
    rooms,
    roomSize,
    variants: variants.map((v, i) => perCall(v.name, v.full, totals[i]!)),
  };
}

function perCall(variant: string, refused: boolean, m: Measured): PathSummary {
  return {
    variant,
    refused,
    calls: m.calls,
    scriptUs: m.usec / m.calls,
    redisCpuUs: (m.cpuSeconds * 1e6) / m.calls,
    events: m.events / m.calls,
    writes: m.writes / m.calls,
    keptReplies: m.keptReplies / m.calls,
  };
}

/**
 * (d): in every room of 20, one user reloads the page: its connection leaves, and a new one
 * heartbeats. With a grace the leave waits and the new connection calls it off; without, the
 * room hears a leave and a join.
 */
async function reloads(
  lab: Lab,
  g: GraceProfile,
  progress: Progress,
): Promise<GraceResults["reload"]> {
  const { rooms, roomSize, inFlight, phases } = g.paths;
  const graces = [0, g.leaveGraceMs];
  const population = members(rooms, roomSize, "reload");
  const roomNames = [...new Set(population.map((m) => m.room))];
  const reloader = population[0]!.user;
  const variants = await progress.step("grace: page reloads, rooms of 20", async () => {
    await lab.flush();
    const deployed = [];
    for (const leaveGraceMs of graces) {
      const client = lab.connect({ enableAutoPipelining: true });
      const options = { ...STEADY, leaveGraceMs, prefix: `reload-grace${leaveGraceMs}` };
      const rollcall = await deployment(lab, client, options, population);
      deployed.push({ leaveGraceMs, client, rollcall, tab: population[0]!.connection });
    }
    return deployed;
  });
  const totals = variants.map(() => ({ leave: NOTHING, rejoin: NOTHING }));
  for (let phase = 0; phase < phases; phase++) {
    await progress.step(`grace: page reloads ${phase + 1}/${phases}`, async () => {
      for (let k = 0; k < variants.length; k++) {
        const i = (k + phase) % variants.length;
        const v = variants[i]!;
        const graced = v.leaveGraceMs > 0;
        const next = `tab-${phase}`;
        const started = performance.now();
        const [left, leave] = await measure(lab, async () => {
          const replies: { left: boolean; leaving: boolean }[] = [];
          await forEachInFlight(roomNames, inFlight, async (room) => {
            replies.push(await v.rollcall.leave(room, reloader, v.tab));
          });
          return replies;
        });
        const [joined, rejoin] = await measure(lab, async () => {
          const replies: { joined: boolean }[] = [];
          await forEachInFlight(roomNames, inFlight, async (room) => {
            replies.push(await v.rollcall.heartbeat(room, reloader, next));
          });
          return replies;
        });
        const elapsed = performance.now() - started;
        v.tab = next;
        const what = `reload, grace ${v.leaveGraceMs} ms`;
        if (graced && elapsed >= v.leaveGraceMs) {
          throw new Error(`${what}: the reloads took ${Math.round(elapsed)} ms, past the grace`);
        }
        if (left.some((r) => (graced ? !r.leaving : !r.left))) {
          throw new Error(
            `${what}: a leave was not ${graced ? "held for the grace" : "announced"}`,
          );
        }
        if (joined.some((r) => r.joined === graced)) {
          throw new Error(`${what}: a new connection ${graced ? "joined again" : "did not join"}`);
        }
        totals[i] = { leave: add(totals[i]!.leave, leave), rejoin: add(totals[i]!.rejoin, rejoin) };
        await lab.dropReplies();
      }
    });
  }
  for (const v of variants) lab.release(v.client);
  await lab.flush();
  return {
    rooms,
    roomSize,
    variants: variants.map((v, i) => {
      const { leave, rejoin } = totals[i]!;
      const reloadCount = leave.calls;
      return {
        leaveGraceMs: v.leaveGraceMs,
        reloads: reloadCount,
        leaveUs: leave.usec / reloadCount,
        rejoinUs: rejoin.usec / reloadCount,
        scriptUs: (leave.usec + rejoin.usec) / reloadCount,
        redisCpuUs: ((leave.cpuSeconds + rejoin.cpuSeconds) * 1e6) / reloadCount,
        events: (leave.events + rejoin.events) / reloadCount,
      };
    }),
  };
}

const STEADY_LABEL: Record<SteadyVariant, (g: GraceResults) => string> = {
  plain: () => "no grace, no capacity",
  grace: (g) => `leaveGraceMs ${number(g.leaveGraceMs)}`,
  capacity: (g) => `capacity ${g.capacity}`,
};

function graceSection(g: GraceResults): string {
  const st = g.steady;
  const of = (v: SteadyVariant) => st.summary.find((s) => s.variant === v)!;
  const join = g.join.variants;
  const [none, capped, refused] = join;
  const [plain, graced] = g.reload.variants;
  const change = (from: number, to: number) =>
    `${number(from, 2)} → ${number(to, 2)} µs (${ratio(to / from)})`;
  return [
    "## Leave grace and room capacity on the heartbeat path",
    "",
    "### (a), (b) Steady heartbeats: redis-benchmark, Redis time per call",
    "",
    `As the ceiling: ${st.roomSize} rooms of ${st.roomSize} users in a deployment of one ` +
      `bucket, \`-c ${st.config.clients} -P ${st.config.pipeline} -n ` +
      `${number(st.config.requests)}\`, the command of a real steady heartbeat captured with ` +
      "MONITOR in each variant: a deployment with no grace, one with " +
      `\`leaveGraceMs: ${number(g.leaveGraceMs)}\`, and the first deployment's heartbeat with ` +
      `\`capacity: ${g.capacity}\`. Interleaved, the order turning each repeat; each run is ` +
      "checked to run exactly TIME, HMGET, HSET per call. *÷ plain* is the median of each " +
      "repeat's ratio.",
    "",
    table(
      ["variant", "script µs / call", "÷ plain", "Redis CPU µs / call", "best calls/s"],
      STEADY_VARIANTS.map((v) => [
        STEADY_LABEL[v](g),
        number(of(v).usPerCall, 2),
        ratio(of(v).ratio),
        number(of(v).redisCpuUs, 2),
        number(of(v).bestOpsPerSec),
      ]),
    ),
    "",
    "```",
    ...st.commands.map((c) => c.command.map((a) => (a === "" ? '""' : a)).join(" ")),
    "```",
    "",
    "### (c) The join path: a newcomer into a room of " + g.join.roomSize,
    "",
    `In each of ${number(g.join.rooms)} rooms of ${g.join.roomSize}, a newcomer's heartbeat ` +
      "(16 in flight, one auto-pipelined connection), then its leave (not measured); the " +
      "variants alternate phase by phase. Per call: Redis's time in EVALSHA, redis-server's " +
      "CPU, events published, writing commands run on presence (HSET, HINCRBY, ZADD, PEXPIRE, " +
      "…: a join writes the record, the counts, the due entry and the keys' expiry) and calls " +
      "that kept their reply for a resend (an APPEND and a PEXPIRE of the replay string, not " +
      "counted as presence writes).",
    "",
    table(
      [
        "variant",
        "calls",
        "script µs / call",
        "Redis CPU µs / call",
        "events / call",
        "writing commands / call",
        "kept replies / call",
      ],
      join.map((v) => [
        v.variant,
        number(v.calls),
        number(v.scriptUs, 2),
        number(v.redisCpuUs, 2),
        number(v.events, 2),
        number(v.writes, 2),
        number(v.keptReplies, 2),
      ]),
    ),
    "",
    "### (d) A page reload: the leave, then a new connection",
    "",
    `In each of ${number(g.reload.rooms)} rooms of ${g.reload.roomSize}, one user's connection ` +
      "leaves and a new one of the same user heartbeats (all leaves, then all new connections, " +
      "well within the grace), in a deployment without a grace and one with " +
      `\`leaveGraceMs: ${number(g.leaveGraceMs)}\`. Without a grace the room hears a leave and ` +
      "a join; within it, nothing. Not counted: the record in its grace leaves the room's due " +
      "entry at the grace's end, so a Sweeper visits the room once then and finds nothing (see " +
      "the live rooms' cost per visit).",
    "",
    table(
      [
        "leaveGraceMs",
        "reloads",
        "leave µs",
        "new connection µs",
        "script µs / reload",
        "Redis CPU µs / reload",
        "events / reload",
      ],
      g.reload.variants.map((v) => [
        number(v.leaveGraceMs),
        number(v.reloads),
        number(v.leaveUs, 2),
        number(v.rejoinUs, 2),
        number(v.scriptUs, 2),
        number(v.redisCpuUs, 2),
        number(v.events, 2),
      ]),
    ),
    "",
    `In one line: a steady heartbeat's script time ${change(of("plain").usPerCall, of("grace").usPerCall)} ` +
      `with the grace, ${change(of("plain").usPerCall, of("capacity").usPerCall)} with a capacity; ` +
      `a join ${change(none!.scriptUs, capped!.scriptUs)} with a capacity, and a refusal from a ` +
      `full room costs ${number(refused!.scriptUs, 2)} µs; a reload ` +
      `${change(plain!.scriptUs, graced!.scriptUs)} of script time with the grace, publishing ` +
      `${number(graced!.events)} events instead of ${number(plain!.events)}.`,
  ].join("\n");
}

/** No leave/join pair for a reload within the grace; a full room refuses a join whole. */
function rows(g: GraceResults): Row[] {
  const [plain, graced] = g.reload.variants;
  const refused = g.join.variants.find((v) => v.refused)!;
  return [
    {
      name: "a page reload within the leave grace publishes nothing (no leave/join pair)",
      value: graced!.events,
      unit: "events per reload",
      digits: 2,
      note:
        `with a ${number(g.leaveGraceMs)} ms grace; ${number(plain!.events, 2)} without; ` +
        `${number(graced!.reloads)} reloads`,
      target: { op: "=", limit: 0 },
    },
    {
      name: "a join into a full room writes and publishes nothing (but its kept reply)",
      value: refused.writes,
      unit: "writing commands",
      digits: 2,
      note:
        `${number(refused.events, 2)} events per refusal; ${number(refused.calls)} refusals; ` +
        `${number(refused.keptReplies, 2)} kept replies`,
      target: { op: "=", limit: 0, holds: refused.events === 0 },
    },
  ];
}

/** The leave grace and room capacity on the heartbeat path, the join path, a reload. */
export const grace: Section<GraceProfile, GraceResults> = {
  name: "grace",
  profiles: {
    full: {
      leaveGraceMs: 5_000,
      capacity: 50,
      steady: { roomSize: 20, clients: 50, pipeline: 16, requests: 200_000, repeats: 3 },
      paths: { rooms: 500, roomSize: 20, inFlight: 16, phases: 6 },
    },
    smoke: {
      leaveGraceMs: 5_000,
      capacity: 50,
      steady: { roomSize: 20, clients: 10, pipeline: 16, requests: 5_000, repeats: 1 },
      paths: { rooms: 50, roomSize: 20, inFlight: 16, phases: 1 },
    },
  },
  steps: graceSteps,
  run: benchGrace,
  report: graceSection,
  rows,
};
