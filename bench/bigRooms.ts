import { decodeFromCompressedBase64 } from "hdr-histogram-js";
import { Rollcall, type RollcallOptions } from "../src/index.js";
import type { Limits } from "../src/gateway/index.js";
import { openFilesLimit } from "../src/runtime/limits.js";
import { KitChild } from "../test/kit/child.js";
import { GatewayChild } from "../test/kit/gatewayChild.js";
import type { Lab } from "./lab.js";
import type { Progress } from "./progress.js";
import type { Row, Run, Section } from "./section.js";
import { histogram, info, percentiles, redisCpuSeconds, type Percentiles } from "./stats.js";
import { storm, type StormResult } from "../test/kit/storm.js";
import type { Received, Timed, WatchersRequest, WatchersSettings } from "./watchers.js";

const WATCHERS = "bench/watchers.ts";
/** Sockets in each process of the bench's clients. */
const SOCKETS_PER_PROCESS = 5_000;

/**
 * Large rooms: rooms of 10, 1,000 and 10,000 members, every member a socket of one gateway
 * process, or of two taking turns where the row says (protocol version 2: a large room's events
 * come coalesced), while 1 % of the
 * members change each second (half joins, half leaves, by users that come and go). The sockets
 * live in processes of their own (bench/watchers.ts). Measured: the latency from the call to the
 * event's arrival on the sampled sockets (each of them parses every frame; the others only count
 * bytes), the gateway's CPU per delivered event, the bytes each socket receives per second,
 * Redis's CPU per event. Then the reconnect storm (test/kit/storm.ts) at full size: two gateways
 * of `storm.socketsPerGateway` sockets, one SIGKILLed.
 */

export interface BigRoomsShape {
  roomSize: number;
  rooms: number;
  gateways?: number;
}

export interface BigRoomsProfile {
  /** Each row: `rooms` rooms of `roomSize` sockets (about the same sockets in every row), on
   * `gateways` gateway processes (1 unless said; the sockets' processes take turns). */
  rows: BigRoomsShape[];
  /** Members who change per second, as a share of the members. */
  churn: number;
  runMs: number;
  /** Sockets of each row that parse every frame and time every event. */
  sampled: number;
  storm: { socketsPerGateway: number; roomSize: number; presenceWindowMs: number };
}

export interface BigRoomsRow {
  roomSize: number;
  rooms: number;
  gateways: number;
  sockets: number;
  seconds: number;
  /** Events published (joins and leaves), and delivered (each to every socket of its room). */
  events: number;
  deliveries: number;
  /** From when the call was due to the event's arrival on a sampled socket, ms. */
  latencyMs: Percentiles;
  /** Events a sampled socket should have got and did not (by the end of the run). */
  lost: number;
  /** Frames and bytes a socket received per second, on average over every socket. */
  framesPerSocketPerSec: number;
  bytesPerSocketPerSec: number;
  /** Gateway CPU per delivered event and per event, µs. */
  gatewayUsPerDelivery: number;
  gatewayUsPerEvent: number;
  /** Gateway CPU per frame written to a socket, µs: what a socket's frame costs to send, and so
   * the cores a room's sockets need at one frame per coalescing interval. */
  gatewayUsPerFrame: number;
  /** Redis CPU per event, µs (the calls that publish them, and their pub/sub messages). */
  redisUsPerEvent: number;
  /** The gateway's event-loop delay over the run (the worst gateway's), ms. */
  loopDelayP99: number;
  /** Sockets the gateway closed (slow consumer) or errors it reported. */
  closed: number;
  errors: number;
}

export interface BigRoomsResults {
  churn: number;
  rows: BigRoomsRow[];
  storm: (
    | (StormResult & { redisPeakMemory: number; redisCpu: number; seconds: number })
    | { failure: string }
  ) & {
    /** Sockets per gateway: what ran, and what the profile asked for (more when the process's
     * open-files limit held the storm). */
    asked: number;
    profile: number;
  };
}

/** Caps of the bench's gateway: every socket a user, each socket reading as fast as it can. */
const LIMITS: Partial<Limits> = { maxBufferedBytes: 256 * 1024 * 1024 };
/**
 * The deployment's settings. A join's or leave's roster fragment (the first `eventRosterLimit`
 * members) tells nothing of a room of thousands, and was 40 % of each event's bytes on every
 * socket: a deployment of large rooms sets it to 0 (docs/design.md, "Large rooms"), and so does the
 * bench.
 */
const ENGINE: RollcallOptions = {
  presenceWindowMs: 600_000,
  leaveGraceMs: 0,
  prefix: "big",
  eventRosterLimit: 0,
};
/** Descriptors a gateway process holds besides its sockets (Redis, IPC, tsx's, libuv's). */
const OWN_DESCRIPTORS = 60;
/** Churners present per room at most: the room stays within a few members of its size. */
const CHURNERS = 8;

function bigRoomsSteps(p: BigRoomsProfile): number {
  return 3 * p.rows.length + 1;
}

async function benchBigRooms(
  lab: Lab,
  profile: BigRoomsProfile,
  progress: Progress,
): Promise<BigRoomsResults> {
  // After the kill the surviving gateway holds every socket: the storm is as big as one process's
  // open-files limit allows, less what the gateway keeps open itself (the machines the bench ran
  // on hold it at 20,000, and could not raise it), said in the results.
  const allowed = Math.floor(((openFilesLimit() ?? Infinity) - OWN_DESCRIPTORS) / 2);
  const storm = {
    ...profile.storm,
    socketsPerGateway: Math.min(profile.storm.socketsPerGateway, allowed),
  };
  const rows: BigRoomsRow[] = [];
  for (const row of profile.rows) rows.push(await churnRow(lab, profile, row, progress));
  // A storm that fails (it did not converge in time) is a result too: reported, with the rows.
  const stormed = await progress
    .step(`big rooms: storm of 2 × ${storm.socketsPerGateway} sockets`, () => stormRun(lab, storm))
    .catch((error: unknown) => ({
      failure: error instanceof Error ? error.message : String(error),
    }));
  return {
    churn: profile.churn,
    rows,
    storm: { ...stormed, asked: storm.socketsPerGateway, profile: profile.storm.socketsPerGateway },
  };
}

async function churnRow(
  lab: Lab,
  profile: BigRoomsProfile,
  { roomSize, rooms, gateways: processes = 1 }: BigRoomsShape,
  progress: Progress,
): Promise<BigRoomsRow> {
  await lab.flush();
  const on = processes > 1 ? ` on ${processes} gateways` : "";
  const label = `big rooms: ${rooms} × ${roomSize}${on}`;
  const rollcall = new Rollcall(lab.connect(), ENGINE);
  const sockets = roomSize * rooms;
  const gateways: GatewayChild[] = [];
  // The sockets live in processes of their own, a few thousand each, as browsers would on many
  // machines: the bench's process makes the calls and adds up.
  const shares: KitChild[] = [];
  const ask = <T>(request: WatchersRequest) =>
    Promise.all(shares.map((share) => share.request<T>(request)));
  const received = async () => {
    const all = await ask<Received>({ type: "received" });
    const sum = (field: keyof Received) => all.reduce((n, r) => n + r[field], 0);
    return { frames: sum("frames"), bytes: sum("bytes"), total: sum("total") };
  };
  /** Resolves once the sockets have received nothing for a second. */
  const settled = async () => {
    for (let last = -1, now = 0; now !== last;) {
      last = now;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      now = (await received()).total;
    }
  };
  const gatewayStats = async (resetLoop = false) => {
    const all = await Promise.all(gateways.map((g) => g.stats(false, resetLoop)));
    const sum = (field: "cpuUs" | "connections" | "errors") =>
      all.reduce((n, s) => n + s[field], 0);
    return {
      cpuUs: sum("cpuUs"),
      connections: sum("connections"),
      errors: sum("errors"),
      loopDelayP99: Math.max(...all.map((s) => s.loopDelay.p99)),
    };
  };
  try {
    await progress.step(`${label}: open and join`, async () => {
      for (let g = 0; g < processes; g++) {
        gateways.push(await GatewayChild.start(lab.url, false, { engine: ENGINE, limits: LIMITS }));
      }
      for (let from = 0; from < sockets; from += SOCKETS_PER_PROCESS) {
        const share: WatchersSettings = {
          urls: gateways.map((g) => g.url),
          from,
          to: Math.min(sockets, from + SOCKETS_PER_PROCESS),
          rooms,
          sampledEvery: Math.max(1, Math.floor(sockets / profile.sampled)),
          opening: 100,
        };
        shares.push(KitChild.start(WATCHERS, share));
      }
      // Every member is present first (a connection of the bench's own), so that the sockets'
      // joins publish nothing: the set-up is not N² join deliveries, only N snapshots.
      await rollcall.heartbeatMany(
        Array.from({ length: sockets }, (_, i) => ({
          room: `big-${i % rooms}`,
          user: `m${i}`,
          connection: `pre-m${i}`,
        })),
      );
      await ask({ type: "open" });
      // What the set-up sent is all read before the run starts.
      await settled();
    });

    return await progress.step(`${label}: churn`, async () => {
      /** When each churn call was due (epoch ms), by "type user": a call that goes out late
       * because the bench's loop stalled counts its wait too. */
      const calledAt: Record<string, number> = {};
      const eventsOf = Array.from({ length: rooms }, () => 0);
      const churners = Array.from({ length: rooms }, () => [] as string[]);
      let next = 0;
      const churn = async (dueAt: number) => {
        const r = Math.floor(Math.random() * rooms);
        const present = churners[r]!;
        const room = `big-${r}`;
        eventsOf[r]! += 1;
        if (present.length >= CHURNERS || (present.length > 0 && Math.random() < 0.5)) {
          const user = present.shift()!;
          calledAt[`leave ${user}`] = dueAt;
          await rollcall.leave(room, user, `c-${user}`);
        } else {
          const user = `churn-${next++}`;
          present.push(user);
          calledAt[`join ${user}`] = dueAt;
          await rollcall.heartbeat(room, user, `c-${user}`);
        }
      };
      const cpuBefore = (await gatewayStats(true)).cpuUs;
      const redisBefore = await redisCpuSeconds(lab.admin);
      await ask({ type: "reset" });
      const perSecond = sockets * profile.churn;
      const started = performance.now();
      let issued = 0;
      const calls: Promise<void>[] = [];
      // Each call at its due time; those a stall made late go at once, timed from when due.
      for (;;) {
        const dueAt = started + ((issued + 1) / perSecond) * 1000;
        if (dueAt - started > profile.runMs) break;
        const wait = dueAt - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        calls.push(churn(performance.timeOrigin + dueAt));
        issued += 1;
      }
      await Promise.all(calls);
      const seconds = (performance.now() - started) / 1000;
      // What is on its way arrives (the coalescing interval, the sockets' queues), all timed.
      await settled();
      const stats = await gatewayStats();
      const redisCpu = (await redisCpuSeconds(lab.admin)) - redisBefore;
      const gatewayUs = stats.cpuUs - cpuBefore;
      const deliveries = issued * roomSize;
      const { frames, bytes } = await received();
      const latency = histogram();
      let expected = 0;
      for (const timed of await ask<Timed>({ type: "latencies", calledAt })) {
        latency.add(decodeFromCompressedBase64(timed.histogram));
        timed.sampled.forEach((n, r) => (expected += n * eventsOf[r]!));
      }
      return {
        roomSize,
        rooms,
        gateways: processes,
        sockets,
        seconds: round(seconds, 1),
        events: issued,
        deliveries,
        latencyMs: scaled(percentiles(latency), 1 / 1000),
        lost: expected - latency.totalCount,
        framesPerSocketPerSec: round(frames / sockets / seconds, 1),
        bytesPerSocketPerSec: Math.round(bytes / sockets / seconds),
        gatewayUsPerDelivery: round(gatewayUs / Math.max(1, deliveries), 2),
        gatewayUsPerEvent: Math.round(gatewayUs / Math.max(1, issued)),
        gatewayUsPerFrame: round(gatewayUs / Math.max(1, frames), 1),
        redisUsPerEvent: Math.round((redisCpu * 1e6) / Math.max(1, issued)),
        loopDelayP99: round(stats.loopDelayP99, 1),
        closed: sockets - stats.connections,
        errors: stats.errors,
      };
    });
  } finally {
    await progress.step(`${label}: close`, async () => {
      await ask({ type: "close" }).catch(() => undefined);
      await Promise.all(gateways.map((g) => g.drained().catch(() => undefined)));
      await Promise.all(shares.map((share) => share.kill()));
      await Promise.all(gateways.map((g) => g.stop()));
    });
  }
}

async function stormRun(
  lab: Lab,
  { socketsPerGateway, roomSize, presenceWindowMs }: BigRoomsProfile["storm"],
): Promise<StormResult & { redisPeakMemory: number; redisCpu: number; seconds: number }> {
  await lab.flush();
  let peak = 0;
  const redisBefore = await redisCpuSeconds(lab.admin);
  const started = performance.now();
  const result = await storm({
    redisUrl: lab.url,
    redis: lab.connect(),
    socketsPerGateway,
    roomSize,
    engine: { prefix: "storm", presenceWindowMs, typingWindowMs: 1_000 },
    timeoutMs: 120_000,
    limits: { maxSockets: 2 * socketsPerGateway, maxSocketsPerUser: 64, maxSocketsPerAddress: 0 },
    sample: async () => {
      const used = Number((await info(lab.admin, "memory")).get("used_memory"));
      peak = Math.max(peak, used);
    },
  });
  const seconds = (performance.now() - started) / 1000;
  const redisCpu = ((await redisCpuSeconds(lab.admin)) - redisBefore) / seconds;
  await lab.flush();
  return {
    ...result,
    redisPeakMemory: peak,
    redisCpu: round(redisCpu, 2),
    seconds: round(seconds, 1),
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

function scaled(p: Percentiles, factor: number): Percentiles {
  const s = (v: number) => round(v * factor, 1);
  return {
    count: p.count,
    p50: s(p.p50),
    p90: s(p.p90),
    p99: s(p.p99),
    p999: s(p.p999),
    max: s(p.max),
  };
}

function bigRoomsMarkdown(results: BigRoomsResults, { meta }: Run): string {
  const lines = [
    `## Large rooms and a reconnect storm (${meta.profile}, ${meta.date.slice(0, 10)})`,
    "",
    `${meta.cores} cores (${meta.cpu}), one redis-server, gateways as processes of their own (protocol v2, large rooms coalesced every 50 ms from 100 members, events without roster fragments: \`eventRosterLimit: 0\`), the sockets in processes of ${SOCKETS_PER_PROCESS.toLocaleString("en")}, all on the same cores. Churn: ${results.churn * 100} % of each room's members per second, half joins and half leaves. Generated by \`tsx bench/main.ts --only big-rooms\`.`,
    "",
    "| room size × rooms | events | latency p50 / p99 (ms) | frames / socket / s | bytes / socket / s | gateway µs / delivery | gateway µs / event | gateway µs / frame | Redis µs / event | loop delay p99 (ms) | lost / closed / errors |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...results.rows.map(
      (r) =>
        `| ${r.roomSize.toLocaleString("en")} × ${r.rooms}${r.gateways > 1 ? ` (${r.gateways} gateways)` : ""} | ${r.events} | ${r.latencyMs.p50} / ${r.latencyMs.p99} | ${r.framesPerSocketPerSec} | ${r.bytesPerSocketPerSec.toLocaleString("en")} | ${r.gatewayUsPerDelivery} | ${r.gatewayUsPerEvent} | ${r.gatewayUsPerFrame} | ${r.redisUsPerEvent} | ${r.loopDelayP99} | ${r.lost} / ${r.closed} / ${r.errors} |`,
    ),
    "",
    "### Reconnect storm",
    "",
    ...(results.storm.asked < results.storm.profile
      ? [
          `The profile asks for 2 × ${results.storm.profile.toLocaleString("en")} sockets; the ` +
            "surviving gateway then holds every socket, and one process's open-files limit " +
            `(which this machine could not raise) held the storm to 2 × ${results.storm.asked.toLocaleString("en")}.`,
          "",
        ]
      : []),
    ...("failure" in results.storm
      ? [
          `The storm of 2 × ${results.storm.asked.toLocaleString("en")} sockets failed: ${results.storm.failure}`,
          "",
        ]
      : []),
    "| sockets | rooms | reconnected | half back (ms) | all back (ms) | converged (ms) | snapshot reads | leaves / joins | Redis peak memory | Redis CPU (cores) | survivor loop delay p99 / max (ms) | errors |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    (() => {
      const s = results.storm;
      if ("failure" in s) return `| ${2 * s.asked} | | failed | | | | | | | | | |`;
      const mib = (s.redisPeakMemory / 1048576).toFixed(1);
      return `| ${s.sockets} | ${s.rooms} | ${s.reconnected} | ${Math.round(s.halfBackMs)} | ${Math.round(s.reconnectMs)} | ${Math.round(s.convergeMs)} | ${s.snapshotReads} | ${s.leaves} / ${s.joins} | ${mib} MiB | ${s.redisCpu} | ${round(s.loopDelay.p99, 1)} / ${round(s.loopDelay.max, 1)} | ${s.clientErrors + s.gatewayErrors + s.unhandled} |`;
    })(),
    "",
  ];
  return lines.join("\n");
}

/** Large rooms under churn, and a reconnect storm: run alone (`--only big-rooms`). */
export const bigRooms: Section<BigRoomsProfile, BigRoomsResults> = {
  name: "big-rooms",
  alone: true,
  profiles: {
    full: {
      rows: [
        { roomSize: 10, rooms: 1_000 },
        { roomSize: 1_000, rooms: 10 },
        { roomSize: 10_000, rooms: 1 },
        // The same room spread over two gateways, as a load balancer would.
        { roomSize: 10_000, rooms: 1, gateways: 2 },
      ],
      churn: 0.01,
      runMs: 20_000,
      sampled: 500,
      storm: { socketsPerGateway: 10_000, roomSize: 100, presenceWindowMs: 10_000 },
    },
    smoke: {
      rows: [
        { roomSize: 10, rooms: 20 },
        { roomSize: 100, rooms: 2 },
        { roomSize: 300, rooms: 1 },
        { roomSize: 300, rooms: 1, gateways: 2 },
      ],
      churn: 0.01,
      runMs: 3_000,
      sampled: 50,
      storm: { socketsPerGateway: 150, roomSize: 100, presenceWindowMs: 3_000 },
    },
  },
  steps: bigRoomsSteps,
  run: benchBigRooms,
  report: bigRoomsMarkdown,
  rows: ({ rows }) =>
    rows.map((r): Row => ({
      name:
        `event latency p99, ${r.roomSize} × ${r.rooms}` +
        (r.gateways > 1 ? ` (${r.gateways} gateways)` : ""),
      value: r.latencyMs.p99,
      unit: "ms",
      digits: 1,
      note: `p50 ${r.latencyMs.p50} ms`,
    })),
};
