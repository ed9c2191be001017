import type { Redis } from "ioredis";
import { Rollcall } from "../src/index.js";
import { HEARTBEAT_BATCH } from "../src/engine/rollcall.js";
import { BATCHED, Ceiling, type CeilingResults, type CeilingRun } from "./ceiling.js";
import { forEachInFlight, keepBusy } from "./drive.js";
import type { Lab } from "./lab.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { members, STEADY, type Member } from "./population.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";
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

/** Makes every member present, in rollcall's layout and in the baseline's. */
export async function populate(lab: Lab, population: readonly Member[]): Promise<void> {
  const client = lab.connect({ enableAutoPipelining: true });
  for (const variant of ["rollcall", "naive"] as const) {
    const beat = BEATS[variant](client);
    await forEachInFlight(population, 64, beat);
  }
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

export function heartbeatSteps(p: Profile): number {
  const t = p.throughput;
  const throughputSteps = t.repeats * (t.autoPipelining.length * t.levels.length + 1);
  return 2 + p.latency.rounds + throughputSteps + 1;
}

export async function benchHeartbeat(
  lab: Lab,
  profile: Profile,
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
  profile: Profile,
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
  profile: Profile,
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
  profile: Profile,
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
