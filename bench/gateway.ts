import { setTimeout as sleep } from "node:timers/promises";
import WebSocket, { type RawData } from "ws";
import { Rollcall, type PresenceEvent, type RollcallOptions } from "../src/index.js";
import {
  BEARER_PROTOCOL,
  SUBPROTOCOL,
  type ClientFrame,
  type ServerFrame,
} from "../src/gateway/index.js";
import { forEachInFlight } from "./drive.js";
import { Inbox } from "./fanout.js";
import { ENGINE, GatewayChild, token } from "../test/kit/gatewayChild.js";
import type { GatewayStats } from "../test/kit/gatewayProcess.js";
import type { Lab } from "./lab.js";
import { weigh } from "./memory.js";
import { members } from "./population.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";
import {
  commandStats,
  commandsBetween,
  histogram,
  hostBusySeconds,
  info,
  percentiles,
  redisCpuSeconds,
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

export function gatewaySteps(p: Profile): number {
  return 2 + 1 + 3 + 2 + 1 + p.gateway.heartbeat.repeats + 1 + 1;
}

export async function benchGateway(
  lab: Lab,
  profile: Profile,
  progress: Progress,
): Promise<GatewayResults> {
  await lab.flush();
  const idle = {
    sockets: profile.gateway.idle.sockets,
    opening: profile.gateway.idle.opening,
    gateway: await idleSockets(lab, profile.gateway, progress, false),
    plain: await idleSockets(lab, profile.gateway, progress, true),
  };
  const [a, b] = await progress.step("gateway: two gateway processes", () =>
    Promise.all([GatewayChild.start(lab.url), GatewayChild.start(lab.url)]),
  );
  try {
    const sockets = await socketsHeld(lab, profile.gateway, progress, a);
    const fanout = await gatewayFanout(lab, profile.gateway, progress, a, b);
    const heartbeats = await heartbeatFrames(lab, profile.gateway, progress, a);
    for (const child of [a, b]) await child.checkErrors();
    const calls = await progress.step("gateway: script calls per heartbeat", () =>
      callsPerHeartbeat(lab, profile.gateway),
    );
    return { idle, sockets, fanout, heartbeats, calls };
  } finally {
    await progress.step("gateway: stop", () => Promise.all([a.stop(), b.stop()]));
    await lab.flush();
  }
}

/** A gateway process, and its answers over IPC. */
/** What a bench sets of a gateway process beyond the gateway bench's own choices. */

type Request = Exclude<ClientFrame, { type: "heartbeat" }> | { type: "heartbeat"; ref?: string };

/** A raw `ws` socket speaking the protocol: cheaper than the client, which keeps a replica. */
class BenchSocket {
  /** Every event frame the socket receives, with its arrival time. */
  onEvent: ((event: PresenceEvent, at: number) => void) | undefined;
  private readonly waiting = new Map<string, [(frame: ServerFrame) => void, (e: Error) => void]>();
  private refs = 0;

  private constructor(
    readonly ws: WebSocket,
    readonly user: string,
  ) {}

  /** Opens a socket as `user`; resolves on the gateway's welcome frame. */
  static async open(url: string, user: string): Promise<BenchSocket> {
    const ws = new WebSocket(url, [SUBPROTOCOL, BEARER_PROTOCOL + (await token(user))], {
      perMessageDeflate: false,
    });
    const socket = new BenchSocket(ws, user);
    return new Promise((resolve, reject) => {
      ws.on("error", (error) => {
        reject(error);
        socket.failAll(error);
      });
      ws.once("close", (code) => socket.failAll(new Error(`socket of ${user} closed (${code})`)));
      ws.on("message", (data: RawData) => {
        const at = performance.now();
        const frame = JSON.parse((data as Buffer).toString("utf8")) as ServerFrame;
        if (frame.type === "welcome") resolve(socket);
        else socket.receive(frame, at);
      });
    });
  }

  /** Sends a frame with a fresh ref; resolves with its reply (ack or snapshot), rejects on error. */
  request(frame: Request): Promise<ServerFrame> {
    const ref = (this.refs++).toString(36);
    return new Promise((resolve, reject) => {
      this.waiting.set(ref, [resolve, reject]);
      this.ws.send(JSON.stringify({ ...frame, ref }));
    });
  }

  close(): void {
    this.ws.close();
  }

  private receive(frame: ServerFrame, at: number): void {
    if (frame.type === "event") {
      this.onEvent?.(frame.event, at);
      return;
    }
    const ref = "ref" in frame ? frame.ref : undefined;
    const waiter = ref === undefined ? undefined : this.waiting.get(ref);
    if (!waiter) {
      if (frame.type === "error") this.failAll(new Error(`${frame.code}: ${frame.message}`));
      return;
    }
    this.waiting.delete(ref!);
    if (frame.type === "error") waiter[1](new Error(`${frame.code}: ${frame.message}`));
    else waiter[0](frame);
  }

  private failAll(error: Error): void {
    for (const [, reject] of this.waiting.values()) reject(error);
    this.waiting.clear();
  }
}

/** Opens one socket per user, `inFlight` handshakes at a time. */
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
    const scriptCalls = async () => {
      const stats = await commandStats(lab.admin);
      return (stats.get("evalsha")?.calls ?? 0) + (stats.get("eval")?.calls ?? 0);
    };
    const before = { at: performance.now(), calls: await scriptCalls() };
    await sleep(runMs);
    const after = { at: performance.now(), calls: await scriptCalls() };
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

async function openAll(url: string, users: readonly string[], inFlight: number) {
  const sockets: BenchSocket[] = [];
  await forEachInFlight(users, inFlight, async (user) => {
    sockets.push(await BenchSocket.open(url, user));
  });
  return sockets;
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
      const watchers = await openAll(
        b.url,
        rooms.map((_, i) => `watcher-${i}`),
        16,
      );
      await Promise.all(
        watchers.map((w, i) => {
          w.onEvent = (event, at) => inbox.deliver(`${event.type} ${event.room} ${event.user}`, at);
          return w.request({ type: "join", room: rooms[i]! });
        }),
      );
      const residents = await openAll(
        a.url,
        rooms.map((_, i) => `resident-${i}`),
        16,
      );
      await Promise.all(residents.map((r, i) => r.request({ type: "join", room: rooms[i]! })));
      const pool = Math.min(10, samples);
      const senders = await openAll(
        a.url,
        Array.from({ length: pool }, (_, i) => `newcomer-${i}`),
        pool,
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
