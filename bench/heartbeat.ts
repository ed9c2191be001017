import type { Redis } from "ioredis";
import { Rollcall } from "../src/index.js";
import { HEARTBEAT_BATCH } from "../src/engine/rollcall.js";
import {
  BATCHED,
  Ceiling,
  ceilingSection,
  summarizeCeiling,
  type CeilingConfig,
  type CeilingResults,
  type CeilingRun,
  makeSteady,
} from "./ceiling.js";
import { forEachInFlight, keepBusy } from "./drive.js";
import { number, percent, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import type { Lab } from "./lab.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { members, STEADY, type Member } from "./population.js";
import type { Progress } from "./progress.js";
import type { Row, Section } from "./section.js";
import {
  commandsBetween,
  commandStats,
  histogram,
  micros,
  percentiles,
  underLoad,
  type Load,
  type Percentiles,
} from "./stats.js";

export const VARIANTS = ["rollcall", "naive", "multi"] as const;
export type Variant = (typeof VARIANTS)[number];

/** A heartbeat on one connection; true when it made the user join. */
export type Beat = (member: Member) => Promise<boolean>;

const BEATS: Record<Variant, (redis: Redis) => Beat> = {
  rollcall: (redis) => {
    const rollcall = new Rollcall(redis, STEADY);
    return async (m) => (await rollcall.heartbeat(m.room, m.user, m.connection)).joined;
  },
  naive: (redis) => {
    const tracker = new NaiveTracker(redis, STEADY.presenceWindowMs! / 1000);
    return (m) => tracker.heartbeat(m.room, m.user);
  },
  multi: (redis) => {
    const tracker = new NaiveTracker(redis, STEADY.presenceWindowMs! / 1000);
    return (m) => tracker.heartbeatInTransaction(m.room, m.user);
  },
};

/** A heartbeat of one variant, on the given connection. */
export function beater(variant: Variant, redis: Redis): Beat {
  return BEATS[variant](redis);
}

/**
 * Makes every member present, in rollcall's layout and in the baseline's, and steady in
 * rollcall's (makeSteady): a connection's first heartbeat after its join takes the slow path,
 * and every live connection is long past it in a steady state.
 */
export async function populate(lab: Lab, population: readonly Member[]): Promise<void> {
  const client = lab.connect({ enableAutoPipelining: true });
  await makeSteady(lab, new Rollcall(client, STEADY), population);
  await forEachInFlight(population, 64, BEATS.naive(client));
  lab.release(client);
  // Each join kept its reply for the replay window: their expiry would run under the measurements.
  await lab.dropReplies();
}

function steady(joined: boolean, variant: string): void {
  if (joined) throw new Error(`a measured ${variant} heartbeat joined: the population expired`);
}

/** A PING: one round trip that does nothing, the floor under any heartbeat. */
export const ROUND_TRIP = "round trip" as const;

export interface LatencyResult {
  variant: Variant | typeof ROUND_TRIP;
  /** Microseconds, one sequential client, call to reply. */
  us: Percentiles;
}

export interface ThroughputRun {
  /** `batched`: rollcall's heartbeatMany, a bucket's connections per call. */
  variant: Variant | typeof BATCHED;
  inFlight: number;
  connections: number;
  autoPipelining: boolean;
  opsPerSec: number;
  load: Load;
}

export interface CommandCount {
  variant: Variant;
  mode: string;
  heartbeats: number;
  /** Commands the client sent (EVAL/EVALSHA for rollcall; everything for the naive ones). */
  sent: number;
  /** Every command Redis ran, those run by the script included. */
  executed: number;
  /** Server time of the script call and of the commands it ran, µs per heartbeat (rollcall). */
  scriptUs: number | null;
  innerUs: number | null;
  /** Calls per heartbeat by command, from INFO commandstats. */
  byCommand: Record<string, number>;
}

export interface HeartbeatResults {
  population: { rooms: number; usersPerRoom: number };
  latency: LatencyResult[];
  throughput: ThroughputRun[];
  ceiling: CeilingResults;
  commands: CommandCount[];
}

export interface HeartbeatProfile {
  /** Users already present, one connection each: the steady state heartbeats measure. */
  population: { rooms: number; usersPerRoom: number };
  /** Sequential heartbeats per variant, taken in rounds that alternate the variants. */
  latency: { samples: number; rounds: number; warmup: number };
  throughput: {
    /** Heartbeats kept in flight, spread over this many connections (instances). */
    levels: { inFlight: number; connections: number }[];
    autoPipelining: boolean[];
    runMs: number;
    /** Each configuration runs this many times; the best run counts (noise only slows). */
    repeats: number;
  };
  commands: { heartbeats: number };
  /** redis-benchmark runs of each script over R rooms of R users, after each throughput repeat. */
  ceiling: CeilingConfig;
}

function heartbeatSteps(p: HeartbeatProfile): number {
  const t = p.throughput;
  const throughputSteps = t.repeats * (t.autoPipelining.length * t.levels.length + 1);
  return 2 + p.latency.rounds + throughputSteps + 1;
}

async function benchHeartbeat(
  lab: Lab,
  profile: HeartbeatProfile,
  progress: Progress,
): Promise<HeartbeatResults> {
  const { rooms, usersPerRoom } = profile.population;
  const population = members(rooms, usersPerRoom);
  await lab.flush();
  await progress.step("heartbeat: population", () => populate(lab, population));
  const ceiling = await progress.step("heartbeat: ceiling users and commands", () =>
    Ceiling.prepare(lab, profile.ceiling),
  );
  const latency = await sequentialLatency(lab, profile, progress, population);
  const [throughputRuns, ceilingRuns] = await throughput(
    lab,
    profile,
    progress,
    population,
    ceiling,
  );
  return {
    population: profile.population,
    latency,
    throughput: throughputRuns,
    ceiling: {
      redisBenchmark: ceiling.version,
      clients: profile.ceiling.clients,
      pipeline: profile.ceiling.pipeline,
      requests: profile.ceiling.requests,
      commands: ceiling.commands,
      runs: ceilingRuns,
    },
    commands: await progress.step("heartbeat: commands per heartbeat", () =>
      commandsPerHeartbeat(lab, profile, population),
    ),
  };
}

/** Each variant on its own connection; rounds alternate them so drift on the host hits all. */
async function sequentialLatency(
  lab: Lab,
  profile: HeartbeatProfile,
  progress: Progress,
  population: readonly Member[],
): Promise<LatencyResult[]> {
  const { samples, rounds, warmup } = profile.latency;
  const ping = lab.connect();
  const timed: { variant: LatencyResult["variant"]; beat: Beat }[] = [
    ...VARIANTS.map((variant) => ({ variant, beat: BEATS[variant](lab.connect()) })),
    {
      variant: ROUND_TRIP,
      beat: async () => {
        await ping.ping();
        return false;
      },
    },
  ];
  const runners = timed.map((runner) => ({ ...runner, h: histogram(), next: 0 }));
  for (const r of runners) {
    for (let i = 0; i < warmup; i++) await r.beat(population[i % population.length]!);
  }
  for (let round = 0; round < rounds; round++) {
    await progress.step(`heartbeat: sequential latency ${round + 1}/${rounds}`, async () => {
      for (const r of runners) {
        for (let i = 0; i < samples / rounds; i++) {
          const member = population[r.next++ % population.length]!;
          const started = performance.now();
          const joined = await r.beat(member);
          r.h.recordValue(micros(started));
          steady(joined, r.variant);
        }
      }
    });
  }
  return runners.map((r) => ({ variant: r.variant, us: percentiles(r.h) }));
}

/**
 * Every configuration and variant in turn, then the ceiling, and again for each repeat: the
 * host's load drifts, so what is compared is measured close together.
 */
async function throughput(
  lab: Lab,
  profile: HeartbeatProfile,
  progress: Progress,
  population: readonly Member[],
  ceiling: Ceiling,
): Promise<[ThroughputRun[], CeilingRun[]]> {
  const { levels, autoPipelining, runMs, repeats } = profile.throughput;
  const runs: ThroughputRun[] = [];
  const ceilingRuns: CeilingRun[] = [];
  for (let repeat = 0; repeat < repeats; repeat++) {
    for (const pipelined of autoPipelining) {
      for (const { inFlight, connections } of levels) {
        const label = `heartbeat: throughput, ${describe({ inFlight, connections, autoPipelining: pipelined })}`;
        await progress.step(label, async () => {
          for (const variant of VARIANTS) {
            const clients = Array.from({ length: connections }, () =>
              lab.connect({ enableAutoPipelining: pipelined }),
            );
            const beats = clients.map((client) => BEATS[variant](client));
            // The first call on a connection sends the script source; it is not the steady state.
            await Promise.all(beats.map((beat) => beat(population[0]!)));
            await lab.collectLuaGarbage();
            const [ops, load] = await underLoad(lab.admin, () =>
              keepBusy(inFlight, runMs, async (i) => {
                const beat = beats[i % connections]!;
                steady(await beat(population[i % population.length]!), variant);
              }),
            );
            for (const client of clients) lab.release(client);
            runs.push({
              variant,
              inFlight,
              connections,
              autoPipelining: pipelined,
              opsPerSec: ops / load.seconds,
              load,
            });
          }
          const clients = Array.from({ length: connections }, () =>
            lab.connect({ enableAutoPipelining: pipelined }),
          );
          const [heartbeats, load] = await batchedRun(lab, clients, population, inFlight, runMs);
          for (const client of clients) lab.release(client);
          runs.push({
            variant: BATCHED,
            inFlight,
            connections,
            autoPipelining: pipelined,
            opsPerSec: heartbeats / load.seconds,
            load,
          });
        });
      }
    }
    await progress.step("heartbeat: ceiling, redis-benchmark", async () => {
      ceilingRuns.push(...(await ceiling.round(repeat)));
    });
  }
  return [runs, ceilingRuns];
}

/**
 * What a gateway sends: each bucket's connections in batches of HEARTBEAT_BATCH, one
 * heartbeatMany each, `inFlight` batches outstanding. Returns the heartbeats done.
 */
async function batchedRun(
  lab: Lab,
  clients: readonly Redis[],
  population: readonly Member[],
  inFlight: number,
  runMs: number,
): Promise<[number, Load]> {
  const engines = clients.map((client) => new Rollcall(client, STEADY));
  const byBucket = new Map<number, Member[]>();
  for (const m of population) {
    const bucket = engines[0]!.bucketOf(m.room);
    const members = byBucket.get(bucket) ?? [];
    byBucket.set(bucket, members);
    members.push(m);
  }
  const batches = [...byBucket.values()].flatMap((members) =>
    Array.from({ length: Math.ceil(members.length / HEARTBEAT_BATCH) }, (_, i) =>
      members.slice(i * HEARTBEAT_BATCH, (i + 1) * HEARTBEAT_BATCH),
    ),
  );
  const beat = async (engine: Rollcall, batch: readonly Member[]) => {
    const results = await engine.heartbeatMany(batch);
    for (const r of results) if (r.error) throw r.error;
    if (results.some((r) => !r.error && r.joined)) steady(true, BATCHED);
    return batch.length;
  };
  // The first call on a connection sends the script source; it is not the steady state.
  await Promise.all(engines.map((engine) => beat(engine, batches[0]!)));
  await lab.collectLuaGarbage();
  let heartbeats = 0;
  const [, load] = await underLoad(lab.admin, () =>
    keepBusy(inFlight, runMs, async (i) => {
      heartbeats += await beat(engines[i % engines.length]!, batches[i % batches.length]!);
    }),
  );
  return [heartbeats, load];
}

/** How a throughput run drove Redis, in words. */
export function describe(run: Pick<ThroughputRun, "inFlight" | "connections" | "autoPipelining">) {
  const spread = run.connections > 1 ? ` on ${run.connections} connections` : "";
  return `${run.inFlight} in flight${spread}${run.autoPipelining ? ", auto-pipelined" : ""}`;
}

const SCRIPT_COMMANDS = new Set(["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"]);

/**
 * Counts from INFO commandstats, which also counts every command a script runs. While a variant
 * is measured it is the only client sending anything, so when scripts ran, every other command
 * counted was run by them; when none ran, every command counted was sent by the client.
 */
async function commandsPerHeartbeat(
  lab: Lab,
  profile: HeartbeatProfile,
  population: readonly Member[],
): Promise<CommandCount[]> {
  const heartbeats = Math.min(profile.commands.heartbeats, population.length);
  const modes = [
    { inFlight: 1, connections: 1, autoPipelining: false },
    { inFlight: 64, connections: 1, autoPipelining: true },
  ];
  const counts: CommandCount[] = [];
  for (const { inFlight, autoPipelining, ...mode } of modes) {
    for (const variant of VARIANTS) {
      const client = lab.connect({ enableAutoPipelining: autoPipelining });
      const beat = BEATS[variant](client);
      // The first call checks the deployment and loads the script: not a heartbeat's cost.
      steady(await beat(population[0]!), variant);
      await lab.collectLuaGarbage();
      const before = await commandStats(lab.admin);
      await forEachInFlight(population.slice(0, heartbeats), inFlight, async (m) => {
        steady(await beat(m), variant);
      });
      const ran = commandsBetween(before, await commandStats(lab.admin));
      lab.release(client);
      let scriptCalls = 0;
      let scriptUsec = 0;
      let total = 0;
      let totalUsec = 0;
      const byCommand: Record<string, number> = {};
      for (const [name, stat] of ran) {
        if (stat.failed > 0) {
          throw new Error(`${stat.failed} ${name} calls failed during ${variant}`);
        }
        byCommand[name] = stat.calls / heartbeats;
        total += stat.calls;
        totalUsec += stat.usec;
        if (SCRIPT_COMMANDS.has(name)) {
          scriptCalls += stat.calls;
          scriptUsec += stat.usec;
        }
      }
      const scripted = scriptCalls > 0;
      counts.push({
        variant,
        mode: describe({ inFlight, autoPipelining, ...mode }),
        heartbeats,
        sent: (scripted ? scriptCalls : total) / heartbeats,
        executed: total / heartbeats,
        scriptUs: scripted ? scriptUsec / heartbeats : null,
        innerUs: scripted ? (totalUsec - scriptUsec) / heartbeats : null,
        byCommand,
      });
    }
  }
  return counts;
}

const LABEL: Record<LatencyResult["variant"], string> = {
  rollcall: "rollcall (1 EVALSHA)",
  naive: "baseline (ZSCORE, ZADD, EXPIRE)",
  multi: "baseline in MULTI/EXEC",
  [ROUND_TRIP]: "one round trip (PING), for scale",
};

/**
 * What held a run back, from who was busy: a process near a whole core, or the host's cores
 * full (other processes count: the host may be shared), or else neither: each call waited on
 * its round trip.
 */
function boundBy(load: Load, cores: number): string {
  if (load.redisCpu >= 0.9) return "Redis CPU";
  if (load.clientCpu >= 0.9) return "client CPU (Node)";
  if (load.hostCpu >= 0.9 * cores) return "the host's cores";
  return "round trips";
}

/** Cores the host kept busy, and how many of them went to processes other than these two. */
function hostCell(load: Load, cores: number): string {
  const others = Math.max(0, load.hostCpu - load.redisCpu - load.clientCpu);
  return `${number(load.hostCpu, 2)} of ${cores} (others ${number(others, 2)})`;
}

function heartbeatSection(h: HeartbeatResults, cores: number): string {
  const { rooms, usersPerRoom } = h.population;
  const configs = [...new Set(h.throughput.map(describe))];
  const runOf = (variant: Variant, config: string) =>
    h.throughput
      .filter((t) => t.variant === variant && describe(t) === config)
      .reduce((a, b) => (b.opsPerSec > a.opsPerSec ? b : a));
  return [
    "## Heartbeat",
    "",
    `Steady state: ${number(rooms * usersPerRoom)} users already present in ${number(rooms)} ` +
      `rooms of ${usersPerRoom}, one connection each, each of which beat once more since its join ` +
      "(a connection's first heartbeat after its join takes the slow path: it may be the join's " +
      "resend); every measured heartbeat is a refresh (the bench fails if one joins).",
    "",
    "### Latency, one sequential client (µs, call to reply)",
    "",
    "Each variant has its own connection; rounds alternate the variants so that drift on the " +
      "host hits them alike. A PING on the same kind of connection shows what one round trip " +
      "costs here, before any work.",
    "",
    table(
      ["variant", ...PERCENTILES, "samples"],
      h.latency.map((l) => [LABEL[l.variant], ...percentileCells(l.us), number(l.us.count)]),
    ),
    "",
    "### Throughput (heartbeats/s, best of the repeats)",
    "",
    table(
      ["driven with", ...VARIANTS.map((v) => LABEL[v]), "rollcall ÷ baseline"],
      configs.map((c) => [
        c,
        ...VARIANTS.map((v) => number(runOf(v, c).opsPerSec)),
        ratio(runOf("rollcall", c).opsPerSec / runOf("naive", c).opsPerSec),
      ]),
    ),
    "",
    `Ceiling (redis-benchmark, below, best room size): **${number(ceilingOf(h))}** heartbeats/s.`,
    "",
    "Who was busy during each variant's best run (share of one core), and so what bounded it: " +
      "a process near a whole core is the bottleneck, or else the host's cores when they were " +
      "all busy (*host CPU*: cores busy with every process, the others being anything else " +
      `running on the host), otherwise each call waited on its round trip. The host has ` +
      `${cores} cores for redis-server, the bench and anything else.`,
    "",
    table(
      [
        "variant",
        "best run",
        "heartbeats/s",
        "redis-server CPU",
        "Redis CPU µs per heartbeat",
        "bench (Node) CPU",
        "Node CPU µs per heartbeat",
        "host CPU, cores",
        "bounded by",
      ],
      VARIANTS.map((v) => {
        const b = best(h.throughput, v);
        return [
          LABEL[v],
          describe(b),
          number(b.opsPerSec),
          percent(b.load.redisCpu),
          number((b.load.redisCpu * 1e6) / b.opsPerSec, 1),
          percent(b.load.clientCpu),
          number((b.load.clientCpu * 1e6) / b.opsPerSec, 1),
          hostCell(b.load, cores),
          boundBy(b.load, cores),
        ];
      }),
    ),
    "",
    "### Commands per heartbeat (INFO commandstats deltas)",
    "",
    table(
      [
        "variant",
        "mode",
        "sent by the client",
        "run by Redis",
        "script µs",
        "of which commands µs",
        "commands run",
      ],
      h.commands.map((c) => [
        LABEL[c.variant],
        c.mode,
        number(c.sent, 3),
        number(c.executed, 3),
        c.scriptUs === null ? "—" : number(c.scriptUs, 1),
        c.innerUs === null ? "—" : number(c.innerUs, 1),
        Object.entries(c.byCommand)
          .map(([name, calls]) => `${name} ${number(calls, 2)}`)
          .join(", "),
      ]),
    ),
    "",
    "INFO commandstats also counts each command a script runs, so rollcall's *sent* figure counts " +
      "EVAL and EVALSHA calls only (each connection's first call, not counted here, loads the " +
      "script) and the commands its script ran show under *run by Redis*: TIME, one HMGET of the " +
      "room's meta and the user's record, one HSET of the patched record. The baseline sends everything it runs; its MULTI/EXEC variant sends five " +
      "commands in one round trip. *script µs* is the time Redis spent in EVALSHA per " +
      "heartbeat, *of which commands µs* the part spent in the commands the script called; the " +
      "rest is Lua.",
  ].join("\n");
}

/** The best run of a variant over every configuration: its saturated throughput. */
export function best(
  runs: readonly ThroughputRun[],
  variant: ThroughputRun["variant"],
): ThroughputRun {
  return runs
    .filter((r) => r.variant === variant)
    .reduce((a, b) => (b.opsPerSec > a.opsPerSec ? b : a));
}

/** rollcall's steady heartbeat under redis-benchmark, the best of every room size. */
export function ceilingOf(heartbeat: HeartbeatResults): number {
  const rollcall = heartbeat.ceiling.runs.filter((r) => r.script === "rollcall");
  return Math.max(...rollcall.map((r) => r.opsPerSec));
}

/** The steady heartbeat's Redis time against the baseline's work scripted, by room size. */
const STEADY_LIMIT = (roomSize: number) => (roomSize >= 128 ? 0.5 : 1);

/** The heartbeat's targets: Redis time against the baseline's, throughput, commands sent. */
function rows(h: HeartbeatResults): Row[] {
  const latency = (variant: Variant) => h.latency.find((l) => l.variant === variant)!.us.p50;
  const rollcallP50 = latency("rollcall");
  const naiveP50 = latency("naive");
  const rollcall = best(h.throughput, "rollcall").opsPerSec;
  const naive = best(h.throughput, "naive").opsPerSec;
  const batched = best(h.throughput, "batched").opsPerSec;
  const ceiling = ceilingOf(h);
  const counts = h.commands.filter((c) => c.variant === "rollcall");
  const summary = summarizeCeiling(h.ceiling);
  return [
    ...summary.map((c) => ({
      name:
        `steady heartbeat, Redis time per call ≤ ${STEADY_LIMIT(c.roomSize)}× the baseline's ` +
        `work as one script, ${c.roomSize} rooms of ${c.roomSize}`,
      value: c.ratio,
      unit: "×",
      digits: 2,
      note: `${number(c.us.rollcall, 2)} µs vs ${number(c.us.naive, 2)} µs`,
      target: { op: "≤" as const, limit: STEADY_LIMIT(c.roomSize) },
    })),
    {
      name: "saturated throughput ≥ 1.5× the baseline's",
      value: rollcall / naive,
      unit: "×",
      digits: 2,
      note: `${number(rollcall)} vs ${number(naive)} /s`,
      target: { op: "≥", limit: 1.5 },
    },
    {
      name: "saturated throughput ≥ 80% of the redis-benchmark ceiling",
      value: (100 * rollcall) / ceiling,
      unit: "%",
      note: `${number(rollcall)} vs ${number(ceiling)} /s`,
      target: { op: "≥", limit: 80 },
    },
    {
      name: "sequential heartbeat p50 ≤ 0.5× the baseline's",
      value: rollcallP50 / naiveP50,
      unit: "×",
      digits: 2,
      note: `${rollcallP50} µs vs ${naiveP50} µs`,
      target: { op: "≤", limit: 0.5 },
    },
    {
      name: "exactly 1.0 command per heartbeat",
      value: Math.max(...counts.map((c) => c.sent)),
      unit: "",
      digits: 3,
      note: counts.map((c) => `${c.mode}: ${number(c.sent, 3)}`).join(", "),
      target: { op: "=", limit: 1, holds: counts.every((c) => c.sent === 1) },
    },
    ...summary.map((s) => ({
      name:
        `batched steady heartbeat, Redis CPU per heartbeat ≤ 0.3× the baseline's work ` +
        `scripted, rooms of ${number(s.roomSize)}`,
      value: s.batched.cpuRatio,
      unit: "×",
      digits: 2,
      note: `${number(s.batched.redisCpuUs, 2)} µs vs ${number(s.batched.naiveRedisCpuUs, 2)} µs`,
      target: { op: "≤" as const, limit: 0.3 },
    })),
    {
      name: "batched throughput ≥ 4× the baseline's",
      value: batched / naive,
      unit: "×",
      digits: 2,
      note: `${number(batched)} vs ${number(naive)} /s`,
      target: { op: "≥", limit: 4 },
    },
  ];
}

const FULL: HeartbeatProfile = {
  population: { rooms: 1_000, usersPerRoom: 10 },
  latency: { samples: 20_000, rounds: 10, warmup: 500 },
  throughput: {
    levels: [
      { inFlight: 1, connections: 1 },
      { inFlight: 8, connections: 1 },
      { inFlight: 64, connections: 1 },
      { inFlight: 256, connections: 4 },
    ],
    autoPipelining: [false, true],
    runMs: 1_500,
    repeats: 3,
  },
  commands: { heartbeats: 2_000 },
  ceiling: { roomSizes: [5, 20, 128], clients: 50, pipeline: 16, requests: 200_000 },
};

/**
 * Steady heartbeats: latency and throughput against the baseline, commands per heartbeat, and
 * redis-benchmark's ceiling (the batched heartbeats' figures are reported in "Redis per batch").
 */
export const heartbeat: Section<HeartbeatProfile, HeartbeatResults> = {
  name: "heartbeat",
  profiles: {
    full: FULL,
    smoke: {
      population: { rooms: 50, usersPerRoom: 10 },
      latency: { samples: 300, rounds: 3, warmup: 20 },
      throughput: { ...FULL.throughput, runMs: 100, repeats: 1 },
      commands: { heartbeats: 100 },
      ceiling: { roomSizes: [5, 20, 128], clients: 10, pipeline: 16, requests: 5_000 },
    },
  },
  steps: heartbeatSteps,
  run: benchHeartbeat,
  report: (h, run) =>
    [heartbeatSection(h, run.meta.cores), "", ceilingSection(h.ceiling, run.meta.cores)].join("\n"),
  rows,
};
