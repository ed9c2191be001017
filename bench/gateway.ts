import { setTimeout as sleep } from "node:timers/promises";
import WebSocket from "ws";
import { Rollcall, type RollcallOptions } from "../src/index.js";
import { BEARER_PROTOCOL, SUBPROTOCOL } from "../src/gateway/index.js";
import { acrossGateways, BenchSocket, openAll } from "./benchSocket.js";
import { forEachInFlight } from "./drive.js";
import { fanout, Inbox } from "./fanout.js";
import { number, percent, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import { best, describe, heartbeat } from "./heartbeat.js";
import { ENGINE, GatewayChild, token } from "../test/kit/gatewayChild.js";
import type { GatewayStats } from "../test/kit/gatewayProcess.js";
import type { Lab } from "./lab.js";
import { memory, weigh } from "./memory.js";
import { members } from "./population.js";
import type { Progress } from "./progress.js";
import { resultOf, type Row, type Run, type Section } from "./section.js";
import {
  commandStats,
  commandsBetween,
  histogram,
  hostBusySeconds,
  info,
  percentiles,
  redisCpuSeconds,
  scriptCalls,
  type Percentiles,
} from "./stats.js";

/**
 * The gateway, each gateway a process of its own (test/kit/gatewayProcess.ts) on
 * the bench's Redis, driven over raw `ws` sockets from the bench process: the sockets one process
 * holds and what each costs it, the fan-out from a frame on one instance to the event on a socket
 * of another, and the explicit heartbeat frames one process sustains.
 */

const STATE = { status: "online" };

export interface GatewayProfile {
  /** Idle sockets (no room) held by a gateway process and by a plain ws server, and opened at
   * once while they are. */
  idle: { sockets: number; opening: number };
  /** Sockets one process holds, each joined to one room of `roomSize`. */
  sockets: number;
  roomSize: number;
  /** Sockets opened, and joins sent, at once. */
  opening: number;
  fanout: { samples: number; rooms: number; warmup: number };
  heartbeat: {
    sockets: number;
    roomsPerSocket: number;
    /** Heartbeat frames each socket keeps outstanding (a frame is sent as each ack arrives). */
    inFlight: number;
    runMs: number;
    repeats: number;
  };
  /** Sockets in rooms, one room each, on a gateway with the default options (its Sweeper
   * included) but this presence window: script calls over `runMs` per heartbeat it owes. */
  calls: { sockets: number; rooms: number; presenceWindowMs: number; runMs: number };
}

/** What a gateway's own heartbeats and sweeps cost in script calls. */
export interface GatewayCallsResult {
  sockets: number;
  rooms: number;
  presenceWindowMs: number;
  seconds: number;
  /** EVAL and EVALSHA calls Redis ran over the run, every script of the deployment's. */
  calls: number;
  /** (socket, room) heartbeats owed over the run: one per pair every third of the window. */
  heartbeats: number;
  callsPerHeartbeat: number;
  /** Members present at the end (nobody expired: every heartbeat happened). */
  present: number;
}

/** A gateway process's memory, bytes (process.memoryUsage() after a full collection). */
export interface ProcessMemory {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export interface SocketsResult {
  sockets: number;
  roomSize: number;
  rooms: number;
  /** The process before the sockets (warmed up), with them open, with each in its room. */
  base: ProcessMemory;
  opened: ProcessMemory;
  joined: ProcessMemory;
  /** Per socket: an open socket, its join, both. */
  perSocket: { open: ProcessMemory; join: ProcessMemory; total: ProcessMemory };
  /** INFO used_memory Δ from no socket to every socket in its room (kept replies deleted). */
  redisUsedMemory: number;
  redisPerSocket: number;
  /** MEMORY USAGE of every key then (the deployment's alone), and per socket. */
  keysMemoryUsage: number;
  keysPerSocket: number;
  keys: number;
  openSeconds: number;
  joinSeconds: number;
}

export interface GatewayFanoutResult {
  event: "join" | "typing" | "leave";
  /** From the frame sent on instance A to the event frame's arrival on instance B, µs. */
  us: Percentiles;
}

export interface GatewayHeartbeatRun {
  seconds: number;
  /** Heartbeat frames acknowledged (each carries a ref and gets its ack). */
  frames: number;
  framesPerSec: number;
  /** Script calls Redis ran over the run (EVALSHA; one per room of the socket per frame). */
  calls: number;
  callsPerSec: number;
  /** Shares of one core over the run. */
  gatewayCpu: number;
  redisCpu: number;
  benchCpu: number;
  /** Cores the host kept busy, every process counted. */
  hostCpu: number;
}

/** One server holding idle sockets: how fast they came in, and what each costs it. */
export interface IdleRun {
  /** Upgrades per second, `opening` at once (the gateway verifies a distinct JWT for each). */
  upgradesPerSec: number;
  base: ProcessMemory;
  opened: ProcessMemory;
  perSocket: ProcessMemory;
}

export interface IdleResult {
  sockets: number;
  opening: number;
  gateway: IdleRun;
  /** A bare ws server set up the same way, measured the same way. */
  plain: IdleRun;
}

export interface GatewayResults {
  idle: IdleResult;
  sockets: SocketsResult;
  fanout: { rooms: number; roomSize: number; samples: number; results: GatewayFanoutResult[] };
  heartbeats: {
    sockets: number;
    roomsPerSocket: number;
    rooms: number;
    inFlight: number;
    runs: GatewayHeartbeatRun[];
  };
  calls: GatewayCallsResult;
}

function gatewaySteps(p: GatewayProfile): number {
  return 2 + 1 + 3 + 2 + 1 + p.heartbeat.repeats + 1 + 1;
}

async function benchGateway(
  lab: Lab,
  profile: GatewayProfile,
  progress: Progress,
): Promise<GatewayResults> {
  await lab.flush();
  const idle = {
    sockets: profile.idle.sockets,
    opening: profile.idle.opening,
    gateway: await idleSockets(lab, profile, progress, false),
    plain: await idleSockets(lab, profile, progress, true),
  };
  const [a, b] = await progress.step("gateway: two gateway processes", () =>
    Promise.all([GatewayChild.start(lab.url), GatewayChild.start(lab.url)]),
  );
  try {
    const sockets = await socketsHeld(lab, profile, progress, a);
    const fanout = await gatewayFanout(lab, profile, progress, a, b);
    const heartbeats = await heartbeatFrames(lab, profile, progress, a);
    for (const child of [a, b]) await child.checkErrors();
    const calls = await progress.step("gateway: script calls per heartbeat", () =>
      callsPerHeartbeat(lab, profile),
    );
    return { idle, sockets, fanout, heartbeats, calls };
  } finally {
    await progress.step("gateway: stop", () => Promise.all([a.stop(), b.stop()]));
    await lab.flush();
  }
}

/**
 * One gateway as users run it (default options, its own Sweeper) but for the presence window,
 * sockets joined to one room each: every EVAL and EVALSHA Redis runs over `runMs`, per
 * (socket, room) heartbeat the gateway owes in that time.
 */
async function callsPerHeartbeat(lab: Lab, config: GatewayProfile): Promise<GatewayCallsResult> {
  const { sockets: count, rooms, presenceWindowMs, runMs } = config.calls;
  const engine: RollcallOptions = { presenceWindowMs, prefix: "gwcalls" };
  const gateway = await GatewayChild.start(lab.url, false, { engine, gateway: { sweeper: true } });
  const observer = new Rollcall(lab.admin, engine);
  const roomOf = (i: number) => `calls-${i % rooms}`;
  try {
    const sockets = await openAll(
      gateway.url,
      Array.from({ length: count }, (_, i) => `caller-${i}`),
      config.opening,
    );
    const joins = sockets.map((socket, i) => ({ socket, room: roomOf(i) }));
    await forEachInFlight(joins, config.opening, ({ socket, room }) =>
      socket.request({ type: "join", room }),
    );
    const before = { at: performance.now(), calls: await scriptCalls(lab.admin) };
    await sleep(runMs);
    const after = { at: performance.now(), calls: await scriptCalls(lab.admin) };
    const seconds = (after.at - before.at) / 1000;
    const heartbeats = (count * seconds * 1000) / (presenceWindowMs / 3);
    const counted = await Promise.all(
      Array.from({ length: rooms }, (_, i) => observer.count(roomOf(i))),
    );
    await gateway.checkErrors();
    for (const socket of sockets) socket.ws.close();
    await gateway.drained();
    return {
      sockets: count,
      rooms,
      presenceWindowMs,
      seconds,
      calls: after.calls - before.calls,
      heartbeats,
      callsPerHeartbeat: (after.calls - before.calls) / heartbeats,
      present: counted.reduce((sum, c) => sum + c.connections, 0),
    };
  } finally {
    await gateway.stop();
  }
}

/**
 * Idle sockets, no room, on a gateway process (a distinct HS256 token verified for each) or on a
 * plain ws server set up the same way: upgrades per second with `opening` under way at once (the
 * tokens signed beforehand), and the process's memory per socket after a full collection.
 */
async function idleSockets(
  lab: Lab,
  config: GatewayProfile,
  progress: Progress,
  plain: boolean,
): Promise<IdleRun> {
  const { sockets: count, opening } = config.idle;
  const what = plain ? "plain ws server" : "gateway";
  const server = await GatewayChild.start(lab.url, plain);
  try {
    return await progress.step(`gateway: ${count} idle sockets on a ${what}`, async () => {
      const tokens = await Promise.all(
        Array.from({ length: count + 3 }, (_, i) => token(`idle-${i}`)),
      );
      const open = (jwt: string) =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(server.url, [SUBPROTOCOL, BEARER_PROTOCOL + jwt], {
            perMessageDeflate: false,
          });
          ws.once("open", () => resolve(ws));
          ws.once("error", reject);
        });
      for (const ws of await Promise.all(tokens.slice(count).map(open))) ws.close();
      await server.drained();
      const base = memoryOf(await server.stats(true));
      const sockets: WebSocket[] = [];
      const started = performance.now();
      await forEachInFlight(tokens.slice(0, count), opening, async (jwt) => {
        sockets.push(await open(jwt));
      });
      const seconds = (performance.now() - started) / 1000;
      const held = await server.stats(true);
      if (held.connections !== count) {
        throw new Error(`the ${what} held ${held.connections} sockets, not ${count}`);
      }
      const opened = memoryOf(held);
      for (const ws of sockets) ws.close();
      await server.drained();
      if (!plain) await server.checkErrors();
      return {
        upgradesPerSec: count / seconds,
        base,
        opened,
        perSocket: perSocket(base, opened, count),
      };
    });
  } finally {
    await server.stop();
  }
}

function memoryOf(s: GatewayStats): ProcessMemory {
  return { rss: s.rss, heapUsed: s.heapUsed, external: s.external, arrayBuffers: s.arrayBuffers };
}

function perSocket(from: ProcessMemory, to: ProcessMemory, sockets: number): ProcessMemory {
  return {
    rss: (to.rss - from.rss) / sockets,
    heapUsed: (to.heapUsed - from.heapUsed) / sockets,
    external: (to.external - from.external) / sockets,
    arrayBuffers: (to.arrayBuffers - from.arrayBuffers) / sockets,
  };
}

async function usedMemory(lab: Lab): Promise<number> {
  return Number((await info(lab.admin, "memory")).get("used_memory"));
}

/**
 * N sockets to one process, each joining one room of `roomSize` with a small state: the
 * process's memory (after a full collection) before, with the sockets open and with them joined,
 * and Redis's used_memory for them.
 */
async function socketsHeld(
  lab: Lab,
  config: GatewayProfile,
  progress: Progress,
  gateway: GatewayChild,
): Promise<SocketsResult> {
  const { sockets: count, roomSize, opening } = config;
  const users = Array.from({ length: count }, (_, i) => `held-${i}`);
  const roomOf = (i: number) => `held-${Math.floor(i / roomSize)}`;
  let sockets: BenchSocket[] = [];
  let opened: GatewayStats | undefined;
  let base: GatewayStats | undefined;
  let redisBefore = 0;
  let openSeconds = 0;
  await progress.step(`gateway: ${count} sockets open`, async () => {
    // Warm-up: a few sockets come and go, so the baseline has every code path loaded.
    const warm = await openAll(gateway.url, ["warm-0", "warm-1", "warm-2"], 3);
    await Promise.all(warm.map((s) => s.request({ type: "join", room: "warm", state: STATE })));
    for (const s of warm) s.close();
    await gateway.drained();
    await lab.dropReplies();
    base = await gateway.stats(true);
    redisBefore = await usedMemory(lab);
    const started = performance.now();
    sockets = await openAll(gateway.url, users, opening);
    openSeconds = (performance.now() - started) / 1000;
    opened = await gateway.stats(true);
  });
  const joinSeconds = await progress.step(`gateway: ${count} sockets join rooms`, async () => {
    const started = performance.now();
    const indexed = sockets.map((socket, i) => ({ socket, i }));
    await forEachInFlight(indexed, opening, ({ socket, i }) =>
      socket.request({ type: "join", room: roomOf(i), state: STATE }),
    );
    const seconds = (performance.now() - started) / 1000;
    // The last joins' events are still on their way to the other sockets of their rooms.
    await sleep(200);
    return seconds;
  });
  const result = await progress.step("gateway: weigh, then close the sockets", async () => {
    await lab.dropReplies();
    const joined = await gateway.stats(true);
    const redisAfter = await usedMemory(lab);
    const { keys, memoryUsage } = await weigh(lab);
    for (const s of sockets) s.close();
    await gateway.drained();
    if (joined.connections !== count) {
      throw new Error(`the gateway held ${joined.connections} sockets, not ${count}`);
    }
    const [b, o, j] = [memoryOf(base!), memoryOf(opened!), memoryOf(joined)];
    return {
      sockets: count,
      roomSize,
      rooms: Math.ceil(count / roomSize),
      base: b,
      opened: o,
      joined: j,
      perSocket: {
        open: perSocket(b, o, count),
        join: perSocket(o, j, count),
        total: perSocket(b, j, count),
      },
      redisUsedMemory: redisAfter - redisBefore,
      redisPerSocket: (redisAfter - redisBefore) / count,
      keysMemoryUsage: memoryUsage,
      keysPerSocket: memoryUsage / count,
      keys,
      openSeconds,
      joinSeconds,
    };
  });
  await lab.flush();
  return result;
}

/**
 * Rooms of 9 before the newcomer, as the engine's fan-out: 7 members present through the engine,
 * a resident socket on instance A (so A already serves the room: a room's first socket on an
 * instance also waits for its SSUBSCRIBE) and a watcher socket on instance B. Newcomers' sockets
 * on A send join, typing and leave frames, one at a time; the time runs from the frame's send to
 * the matching event frame's arrival on the watcher's socket.
 */
async function gatewayFanout(
  lab: Lab,
  config: GatewayProfile,
  progress: Progress,
  a: GatewayChild,
  b: GatewayChild,
): Promise<GatewayResults["fanout"]> {
  const { samples, rooms: roomCount, warmup } = config.fanout;
  const rooms = Array.from({ length: roomCount }, (_, i) => `gwfan-${i}`);
  const inbox = new Inbox();
  const [watchers, senders] = await progress.step(
    "gateway fan-out: rooms and sockets",
    async () => {
      const client = lab.connect({ enableAutoPipelining: true });
      const engine = new Rollcall(client, ENGINE);
      await forEachInFlight(members(roomCount, 7, "gwfan"), 64, (m) =>
        engine.heartbeat(m.room, m.user, m.connection),
      );
      lab.release(client);
      const pool = Math.min(10, samples);
      const { watchers, residents, senders } = await acrossGateways(
        a.url,
        b.url,
        rooms,
        pool,
        (key, at) => inbox.deliver(key, at),
      );
      return [[...watchers, ...residents], senders] as const;
    },
  );

  const recorded = new Map<string, ReturnType<typeof histogram>>();
  const time = async (
    record: boolean,
    key: string,
    series: string,
    frame: () => Promise<unknown>,
  ) => {
    const started = performance.now();
    const [arrival] = await Promise.all([inbox.expect(key), frame()]);
    if (!record) return;
    const h = recorded.get(series) ?? histogram();
    recorded.set(series, h);
    h.recordValue(Math.max(1, Math.round((arrival - started) * 1000)));
  };
  await progress.step("gateway fan-out: join, typing, leave", async () => {
    for (let i = 0; i < warmup + samples; i++) {
      const record = i >= warmup;
      const room = rooms[i % rooms.length]!;
      const sender = senders[i % senders.length]!;
      const at = `${room} ${sender.user}`;
      await time(record, `join ${at}`, "join", () => sender.request({ type: "join", room }));
      await time(record, `typing-start ${at}`, "typing", () =>
        sender.request({ type: "typing", room }),
      );
      await time(record, `leave ${at}`, "leave", () => sender.request({ type: "leave", room }));
    }
  });
  for (const s of [...watchers, ...senders]) s.close();
  await Promise.all([a.drained(), b.drained()]);
  await lab.flush();
  return {
    rooms: roomCount,
    roomSize: 9,
    samples,
    results: (["join", "typing", "leave"] as const).map((event) => ({
      event,
      us: percentiles(recorded.get(event)!),
    })),
  };
}

/**
 * Sockets in several rooms each send explicit heartbeat frames, each with a ref, keeping
 * `inFlight` outstanding per socket: frames acknowledged per second, and who was busy.
 */
async function heartbeatFrames(
  lab: Lab,
  config: GatewayProfile,
  progress: Progress,
  gateway: GatewayChild,
): Promise<GatewayResults["heartbeats"]> {
  const { sockets: count, roomsPerSocket, inFlight, runMs, repeats } = config.heartbeat;
  const roomSize = 10;
  // Pair (socket i, its j-th room) is number j × count + i; rooms take 10 consecutive pairs, so
  // every room holds 10 sockets and a socket's rooms are all different (count ≥ 10).
  const roomOf = (i: number, j: number) => `gwhb-${Math.floor((j * count + i) / roomSize)}`;
  const sockets = await progress.step("gateway: heartbeat sockets join their rooms", async () => {
    const sockets = await openAll(
      gateway.url,
      Array.from({ length: count }, (_, i) => `beater-${i}`),
      config.opening,
    );
    const pairs = sockets.flatMap((socket, i) =>
      Array.from({ length: roomsPerSocket }, (_, j) => ({ socket, room: roomOf(i, j) })),
    );
    await forEachInFlight(pairs, config.opening, ({ socket, room }) =>
      socket.request({ type: "join", room }),
    );
    await lab.dropReplies();
    return sockets;
  });

  let frames = 0;
  let running = true;
  let failure: Error | undefined;
  const loops = sockets.flatMap((socket) =>
    Array.from({ length: inFlight }, async () => {
      try {
        while (running) {
          await socket.request({ type: "heartbeat" });
          frames += 1;
        }
      } catch (error) {
        failure ??= error instanceof Error ? error : new Error(String(error));
        running = false;
      }
    }),
  );
  const snapshot = async () => ({
    at: performance.now(),
    frames,
    gateway: (await gateway.stats()).cpuUs,
    redis: await redisCpuSeconds(lab.admin),
    bench: process.cpuUsage(),
    host: hostBusySeconds(),
    commands: await commandStats(lab.admin),
  });
  const runs: GatewayHeartbeatRun[] = [];
  try {
    // Warm-up: queues filled, every path taken.
    await sleep(Math.min(1_000, runMs / 2));
    for (let repeat = 0; repeat < repeats; repeat++) {
      await progress.step(`gateway: heartbeat frames ${repeat + 1}/${repeats}`, async () => {
        const before = await snapshot();
        await sleep(runMs);
        const after = await snapshot();
        if (failure) throw failure;
        const seconds = (after.at - before.at) / 1000;
        const bench = process.cpuUsage(before.bench);
        const calls = commandsBetween(before.commands, after.commands).get("evalsha")?.calls ?? 0;
        runs.push({
          seconds,
          frames: after.frames - before.frames,
          framesPerSec: (after.frames - before.frames) / seconds,
          calls,
          callsPerSec: calls / seconds,
          gatewayCpu: (after.gateway - before.gateway) / 1e6 / seconds,
          redisCpu: (after.redis - before.redis) / seconds,
          benchCpu: (bench.user + bench.system) / 1e6 / seconds,
          hostCpu: (after.host - before.host) / seconds,
        });
      });
    }
  } finally {
    running = false;
    await Promise.all(loops);
  }
  if (failure) throw failure;
  for (const s of sockets) s.close();
  await gateway.drained();
  await lab.flush();
  return {
    sockets: count,
    roomsPerSocket,
    rooms: Math.ceil((count * roomsPerSocket) / roomSize),
    inFlight,
    runs,
  };
}

const MB = 1024 * 1024;

function memoryCells(m: ProcessMemory, scale = 1, digits = 0): string[] {
  return [m.rss, m.heapUsed, m.external, m.arrayBuffers].map((v) => number(v / scale, digits));
}

/**
 * Who held a gateway run back: a process near a whole core, or else the host's cores when they
 * were nearly all busy (three processes of the bench, and anything else, share them).
 */
function gatewayBound(run: GatewayHeartbeatRun, cores: number): string {
  const processes = [
    { who: "gateway", share: run.gatewayCpu },
    { who: "redis-server", share: run.redisCpu },
    { who: "bench", share: run.benchCpu },
  ];
  const busy = processes.filter((p) => p.share >= 0.9);
  if (busy.length > 0) return busy.map((p) => `${p.who} CPU`).join(", ");
  const busiest = processes.reduce((a, b) => (b.share > a.share ? b : a));
  if (run.hostCpu >= 0.8 * cores) {
    return `the host's cores (busiest: ${busiest.who}, ${percent(busiest.share)})`;
  }
  return "round trips";
}

/** Cores busy with anything but the gateway, Redis and the bench. */
function others(run: GatewayHeartbeatRun): number {
  return Math.max(0, run.hostCpu - run.gatewayCpu - run.redisCpu - run.benchCpu);
}

/** Idle sockets on a gateway and on a plain ws server, and the upgrades per second of each. */
function idleSection(idle: IdleResult): string[] {
  const row = (name: string, run: IdleRun) => [
    name,
    number(run.upgradesPerSec),
    ...memoryCells(run.perSocket),
    number(run.opened.rss / MB, 1),
  ];
  return [
    `### Idle sockets: ${number(idle.sockets)} on a gateway process, and on a plain \`ws\` server`,
    "",
    `Each socket opens (${idle.opening} handshakes under way at once) and joins no room. The ` +
      "gateway verifies a distinct HS256 token for each (signed beforehand, offered as a " +
      "`rollcall.bearer.` subprotocol entry), checks its caps and keeps a session; the plain " +
      "server (`test/kit/gatewayProcess.ts --plain`: a bare `WebSocketServer` set up as the " +
      "gateway's, no compression, no client tracking) accepts and holds. Bytes per socket: the " +
      "process after a full collection with every socket open, less before, ÷ sockets.",
    "",
    table(
      ["server", "upgrades/s", "RSS B/socket", "heap used", "external", "array buffers", "RSS, MB"],
      [row("gateway (JWT verified)", idle.gateway), row("plain ws", idle.plain)],
    ),
    "",
    `The gateway's own share: ${number(idle.gateway.perSocket.rss - idle.plain.perSocket.rss)} B ` +
      "of RSS per idle socket over the plain server's.",
    "",
  ];
}

/** The gateway's figures; the engine's baselines where the run has them (not with --only). */
function gatewaySection(g: GatewayResults, run: Run): string {
  const r = {
    meta: run.meta,
    memory: resultOf(memory, run),
    fanout: resultOf(fanout, run),
    heartbeat: resultOf(heartbeat, run),
  };
  const s = g.sockets;
  const memoryRow = r.memory?.rows.find((row) => row.roomSize === s.roomSize);
  const engine = memoryRow?.cells.find((c) => c.variant === "b");
  const engineFanout = (event: string) =>
    r.fanout?.find((f) => f.event === event && f.variant === "rollcall");
  const h = g.heartbeats;
  const bestRun = h.runs.reduce((a, b) => (b.framesPerSec > a.framesPerSec ? b : a));
  const roomBeats = bestRun.framesPerSec * h.roomsPerSocket;
  const c = g.calls;
  const direct = r.heartbeat ? best(r.heartbeat.throughput, "rollcall") : undefined;
  return [
    "## Gateway",
    "",
    "Gateway processes of their own (`test/kit/gatewayProcess.ts`: a `Gateway` with a JWT secret, " +
      "no Sweeper, pings off, rate limits raised so that frames are never refused, on its own " +
      "ioredis connection with the library's defaults), on the bench's Redis; the bench process " +
      "drives them over raw `ws` sockets (no client replica), each socket authenticated with its " +
      "own HS256 token. Process figures come from the gateway process itself over IPC " +
      "(`process.memoryUsage()` after two full collections, `process.cpuUsage()`).",
    "",
    ...idleSection(g.idle),
    `### Sockets held by one gateway process: ${number(s.sockets)} sockets, one room of ` +
      `${s.roomSize} each`,
    "",
    `Each socket opens (${number(s.sockets / s.openSeconds)} handshakes/s, ` +
      `${number(s.openSeconds, 1)} s), then joins its room with state \`{"status":"online"}\` ` +
      `(${number(s.sockets / s.joinSeconds)} joins/s, ${number(s.joinSeconds, 1)} s), ` +
      `${number(s.rooms)} rooms. The process is weighed warmed up with no socket, with every ` +
      "socket open, and with every socket in its room; bytes per socket are the differences ÷ " +
      "sockets.",
    "",
    table(
      ["bytes", "RSS", "heap used", "external", "array buffers"],
      [
        ["per open socket (handshake, session)", ...memoryCells(s.perSocket.open)],
        ["per join (room feed, subscription, heartbeat entry)", ...memoryCells(s.perSocket.join)],
        ["**per socket in its room**", ...memoryCells(s.perSocket.total)],
        ["process, no socket (MB)", ...memoryCells(s.base, MB, 1)],
        [`process, ${number(s.sockets)} sockets open (MB)`, ...memoryCells(s.opened, MB, 1)],
        [`process, ${number(s.sockets)} sockets joined (MB)`, ...memoryCells(s.joined, MB, 1)],
      ],
    ),
    "",
    `Redis for them: MEMORY USAGE of the deployment's keys ${number(s.keysPerSocket)} B per ` +
      `socket (${number(s.keys)} keys, ${number(s.keysMemoryUsage / MB, 1)} MB); used_memory Δ ` +
      `${number(s.redisPerSocket)} B per socket (${number(s.redisUsedMemory / MB, 1)} MB: the ` +
      "keyspace's own entries and the rooms' sharded subscriptions too, and client buffers, " +
      "which make it noisy for few sockets). The joins' kept replies are deleted first, as in " +
      "the memory section" +
      (engine === undefined
        ? "."
        : `; the engine alone, memory section (b) (a UUID connection per user, the same ` +
          `state) in rooms of ${s.roomSize}: MEMORY USAGE ` +
          `${number(engine.perConnection.memoryUsage)} B, used_memory ` +
          `${number(engine.perConnection.usedMemory)} B per connection.`),
    "",
    `### Fan-out across two gateway instances (µs): frame on instance A → event frame on instance B`,
    "",
    `Rooms of 9 before the newcomer (${g.fanout.rooms} rooms: 7 members present through the ` +
      "engine, a resident socket on A, a watcher socket on B), as the engine's fan-out above. " +
      "A newcomer's socket on A sends `join`, then `typing`, then `leave`, one frame at a time; " +
      "the time runs from the send to the arrival of the matching event frame on the watcher's " +
      "socket (both ends in the bench process, one clock). Baseline: the engine's fan-out in the " +
      "same run (call on one connection → event on a subscriber's), whose difference is the two " +
      "gateways' own share (frame parsing, the queue, the subscriber's relay, two WebSocket " +
      "hops).",
    "",
    table(
      [
        "event",
        ...PERCENTILES.map((p) => `gateways ${p}`),
        "samples",
        "engine p50",
        "engine p99",
        "gateways − engine, p50",
      ],
      g.fanout.results.map((f) => {
        const e = engineFanout(f.event);
        return [
          f.event,
          ...percentileCells(f.us),
          number(f.us.count),
          e ? number(e.us.p50) : "—",
          e ? number(e.us.p99) : "—",
          e ? number(f.us.p50 - e.us.p50) : "—",
        ];
      }),
    ),
    "",
    `### Heartbeat frames one gateway process sustains`,
    "",
    `${number(h.sockets)} sockets, each in ${h.roomsPerSocket} rooms (${number(h.rooms)} rooms ` +
      `of 10), each keeping ${h.inFlight} explicit \`heartbeat\` frames (with a ref) ` +
      "outstanding: the next goes as an ack comes back. A frame heartbeats every room of its " +
      `socket (${h.roomsPerSocket} room heartbeats; the frames of one event-loop turn go out ` +
      "together, one heartbeatMany per bucket). " +
      `Runs of ${number(h.runs[0]?.seconds ?? 0, 1)} s ` +
      `after a warm-up: ${h.runs.length}; CPU in ` +
      "shares of one core over the run (*bench* is the process driving the sockets, on the same " +
      `host: ${r.meta.cores} cores for the gateway, Redis, the bench and anything else).`,
    "",
    table(
      [
        "run",
        "frames/s",
        "script calls/s",
        "calls per frame",
        "gateway CPU",
        "redis-server CPU",
        "bench CPU",
        "host CPU, cores (others)",
        "gateway CPU µs / frame",
        "Redis CPU µs / call",
        "bounded by",
      ],
      h.runs.map((run, i) => [
        `${i + 1}${run === bestRun ? " (best)" : ""}`,
        number(run.framesPerSec),
        number(run.callsPerSec),
        number(run.calls / run.frames, 2),
        percent(run.gatewayCpu),
        percent(run.redisCpu),
        percent(run.benchCpu),
        `${number(run.hostCpu, 2)} of ${r.meta.cores} (${number(others(run), 2)})`,
        number((run.gatewayCpu * 1e6) / run.framesPerSec, 1),
        number((run.redisCpu * 1e6) / run.callsPerSec, 1),
        gatewayBound(run, r.meta.cores),
      ]),
    ),
    "",
    direct
      ? `Baseline: the engine called directly (heartbeat section, best run: ${describe(direct)}) ` +
        `sustains ${number(direct.opsPerSec)} heartbeats/s; through one gateway process, ` +
        `${number(roomBeats)} room heartbeats/s ` +
        `(${ratio(roomBeats / direct.opsPerSec)}) in ${number(bestRun.framesPerSec)} ` +
        "frames/s."
      : `Through one gateway process: ${number(roomBeats)} room heartbeats/s in ` +
        `${number(bestRun.framesPerSec)} frames/s.`,
    "",
    "### Script calls per heartbeat a gateway owes",
    "",
    `One gateway process with the default options (its own Sweeper included) but a ` +
      `${number(c.presenceWindowMs / 1000, 1)} s presence window, ${number(c.sockets)} sockets ` +
      `in ${number(c.rooms)} rooms, one each, heartbeating every room every third of the window ` +
      `by itself: over ${number(c.seconds, 1)} s Redis ran ${number(c.calls)} EVAL and EVALSHA ` +
      `calls for ${number(c.heartbeats)} (socket, room) heartbeats: ` +
      `**${number(c.callsPerHeartbeat, 3)} calls per heartbeat**, every script counted (the ` +
      `sweeps too); ${number(c.present)} connections present at the end.`,
  ].join("\n");
}

/**
 * Frames/s one gateway process sustained before heartbeats were batched (one script call per
 * socket and room): the last full run of that code, 2026-11-30, on this kind of machine (2 cores).
 * Recorded, not measured in this run: the per-call gateway is gone.
 */
const FRAMES_BEFORE_BATCHING = 19_023;

function rows({ heartbeats, calls }: GatewayResults): Row[] {
  const frames = Math.max(...heartbeats.runs.map((run) => run.framesPerSec));
  return [
    {
      name: "gateway heartbeat frames/s per process ≥ 3× before batching (recorded figure)",
      value: frames / FRAMES_BEFORE_BATCHING,
      unit: "×",
      digits: 2,
      note: `${number(frames)} vs ${number(FRAMES_BEFORE_BATCHING)} frames/s`,
      target: { op: "≥", limit: 3 },
    },
    {
      name:
        `a gateway's script calls per (socket, room) heartbeat ≤ 0.1 (${number(calls.sockets)} ` +
        `sockets in ${number(calls.rooms)} rooms, its own Sweeper included)`,
      value: calls.callsPerHeartbeat,
      unit: "",
      digits: 3,
      note: `${number(calls.calls)} calls, ${number(calls.heartbeats)} heartbeats`,
      target: { op: "≤", limit: 0.1, holds: calls.present === calls.sockets },
    },
  ];
}

/** Gateway processes: sockets held, fan-out across two instances, heartbeat frames, calls. */
export const gateway: Section<GatewayProfile, GatewayResults> = {
  name: "gateway",
  profiles: {
    full: {
      idle: { sockets: 10_000, opening: 100 },
      sockets: 5_000,
      roomSize: 20,
      opening: 100,
      fanout: { samples: 1_000, rooms: 20, warmup: 20 },
      heartbeat: { sockets: 200, roomsPerSocket: 3, inFlight: 2, runMs: 3_000, repeats: 3 },
      calls: { sockets: 1_600, rooms: 80, presenceWindowMs: 6_000, runMs: 12_000 },
    },
    smoke: {
      idle: { sockets: 300, opening: 50 },
      sockets: 200,
      roomSize: 20,
      opening: 50,
      fanout: { samples: 30, rooms: 5, warmup: 5 },
      heartbeat: { sockets: 20, roomsPerSocket: 3, inFlight: 2, runMs: 500, repeats: 1 },
      calls: { sockets: 160, rooms: 8, presenceWindowMs: 6_000, runMs: 4_000 },
    },
  },
  steps: gatewaySteps,
  run: benchGateway,
  report: gatewaySection,
  rows,
};
