// One gateway instance as a process of its own, for the bench (bench/gateway.ts starts it with
// --expose-gc): a Gateway listening on a free port, on the Redis and with the settings given as
// JSON (test/kit/child.ts), no Sweeper. Over IPC it says where it listens, answers `stats` with
// its memory and CPU (after a full collection when asked), and closes on `stop`; it ends when the
// bench goes away. With `plain`, a bare `ws` server instead, set up as the gateway sets up its own
// (no compression, the rollcall.v1 subprotocol, no client tracking): the baseline of what a
// socket costs before the gateway keeps anything for it; with `answers` too, it does per frame
// what the gateway does at the least (sends a welcome, parses each JSON frame and answers it with
// an ack of its ref). It also writes a heap snapshot, and starts and stops the CPU profiler, on
// request.
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { Session } from "node:inspector/promises";
import type { AddressInfo } from "node:net";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { writeHeapSnapshot } from "node:v8";
import { Redis } from "ioredis";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { Gateway, SUBPROTOCOL, type GatewayOptions, type Limits } from "../../src/gateway/index.js";
import type { MeterLike } from "../../src/engine/metrics.js";
import { Rollcall, type RollcallOptions } from "../../src/index.js";
import { answer } from "./child.js";

export interface GatewayProcessConfig {
  redisUrl: string;
  engine: RollcallOptions;
  secret: string;
  limits: Partial<Limits>;
  pingMs: number;
  plain?: boolean;
  /** The plain server answers frames (see above). */
  answers?: boolean;
  /** Gateway options a bench sets beyond the caps (coalescing, count frames, a Sweeper). */
  gateway?: Pick<GatewayOptions, "coalesce" | "countIntervalMs" | "sweeper">;
  /** Any socket may follow any user's status (an authorizeUsers hook that allows all). */
  followAnyone?: boolean;
}

export type ToGateway =
  /** Where it listens, once it does. */
  | { type: "address" }
  | { type: "stats"; gc: boolean; resetLoop?: boolean }
  | { type: "heap"; path: string }
  /** Starts the CPU profiler, or stops it and writes its profile to `path`. */
  | { type: "profile"; path?: string }
  | { type: "stop" };

export interface GatewayStats {
  /** process.memoryUsage(), bytes. */
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  /** process.cpuUsage(), user + system, µs since the process started. */
  cpuUs: number;
  /** Sockets open now. */
  connections: number;
  /** Errors the gateway reported, and the first one's message. */
  errors: number;
  firstError: string | null;
  /** Unhandled promise rejections in the process. */
  unhandled: number;
  /** Snapshot reads the gateway made (shared by the sockets that joined together), and pages. */
  snapshotReads: number;
  snapshotPages: number;
  /** Event-loop delay since the process started or the last stats with resetLoop, ms. */
  loopDelay: { p50: number; p99: number; max: number };
}

/** What the requests are answered from, once the server listens. */
interface Served {
  port: number;
  stats: (gc: boolean, resetLoop: boolean) => GatewayStats;
  stop: () => void;
}

let listening: (served: Served) => void = () => undefined;
const served = new Promise<Served>((resolve) => (listening = resolve));
const config = answer<GatewayProcessConfig>(async (request: ToGateway) => {
  const server = await served;
  switch (request.type) {
    case "address":
      return { port: server.port };
    case "stats":
      return server.stats(request.gc, request.resetLoop ?? false);
    case "heap":
      return writeHeapSnapshot(request.path);
    case "profile":
      return profile(request.path);
    case "stop":
      server.stop();
      return null;
  }
});

let inspector: Session | undefined;
/** Starts the profiler, or (given a path) stops it and writes what it took there. */
async function profile(path: string | undefined): Promise<null> {
  if (path === undefined) {
    inspector = new Session();
    inspector.connect();
    await inspector.post("Profiler.enable");
    await inspector.post("Profiler.start");
    return null;
  }
  const taken = await inspector?.post("Profiler.stop");
  if (taken) writeFileSync(path, JSON.stringify(taken.profile));
  inspector?.disconnect();
  inspector = undefined;
  return null;
}

/** Parses a frame and answers it with an ack of its ref (the plain server with `answers`). */
function answerFrame(this: WebSocket, data: RawData): void {
  const frame = JSON.parse((data as Buffer).toString("utf8")) as { ref?: string };
  this.send(JSON.stringify({ type: "ack", ref: frame.ref }), { binary: false });
}

/** A bare ws server: sockets accepted and held, nothing else (but answers, if asked). */
async function plainServer(): Promise<{
  port: number;
  connections: () => number;
  close: () => Promise<void>;
}> {
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
  });
  let open = 0;
  let id = 0;
  const server = createServer();
  server.on("upgrade", (request, socket, head) => {
    wss.handleUpgrade(request, socket, head, (ws) => {
      open += 1;
      ws.on("close", () => (open -= 1));
      if (!config.answers) return;
      ws.on("message", answerFrame);
      ws.send(JSON.stringify({ type: "welcome", user: "plain", connection: String(id++) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => open,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function main(): Promise<void> {
  if (config.plain) return serve(await plainServer(), () => undefined);
  const redis = new Redis(config.redisUrl);
  const rollcall = new Rollcall(redis, { ...config.engine, meter: SNAPSHOT_METER });
  await rollcall.ready();
  const gateway = new Gateway(rollcall, {
    jwt: { secret: config.secret },
    sweeper: false,
    pingMs: config.pingMs,
    limits: config.limits,
    ...config.gateway,
    ...(config.followAnyone ? { authorizeUsers: () => true } : {}),
  });
  const { port } = await gateway.listen(0);
  serve(
    { port, connections: () => gateway.connections, close: () => gateway.close() },
    () => redis.disconnect(),
    gateway,
  );
}

/** The gateway's snapshot reads, counted through the engine's metrics (nothing else is kept). */
const snapshots = { reads: 0, pages: 0 };
const SNAPSHOT_METER: MeterLike = {
  createCounter: (name) => ({
    add: (value, attributes) => {
      if (name !== "rollcall.gateway.snapshot.reads") return;
      snapshots.reads += value;
      snapshots.pages += value * Number(attributes?.pages ?? 1);
    },
  }),
  createUpDownCounter: () => ({ add: () => undefined }),
  createHistogram: () => ({ record: () => undefined }),
};

/** Answers the bench over IPC until it says stop, or goes away. */
function serve(
  server: { port: number; connections: () => number; close: () => Promise<void> },
  closed: () => void,
  gateway?: Gateway,
): void {
  const { port } = server;
  let errors = 0;
  let firstError: string | null = null;
  let unhandled = 0;
  process.on("unhandledRejection", (error) => {
    unhandled += 1;
    firstError ??= `unhandled: ${String(error)}`;
  });
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  gateway?.on("error", (error) => {
    errors += 1;
    firstError ??= error.message;
  });

  const collect = (global as { gc?: () => void }).gc;
  const stats = (gc: boolean): GatewayStats => {
    if (gc && collect) {
      // Twice: the first pass's finalizers free more for the second.
      collect();
      collect();
    }
    const m = process.memoryUsage();
    const cpu = process.cpuUsage();
    return {
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
      cpuUs: cpu.user + cpu.system,
      connections: server.connections(),
      errors,
      firstError,
      unhandled,
      snapshotReads: snapshots.reads,
      snapshotPages: snapshots.pages,
      loopDelay: {
        p50: loop.percentile(50) / 1e6,
        p99: loop.percentile(99) / 1e6,
        max: loop.max / 1e6,
      },
    };
  };

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(0), 5_000).unref();
    void server
      .close()
      .catch(() => undefined)
      .finally(() => {
        closed();
        process.exit(0);
      });
  };
  process.on("SIGTERM", stop);
  listening({
    port,
    stats: (gc, resetLoop) => {
      const figures = stats(gc);
      if (resetLoop) loop.reset();
      return figures;
    },
    stop,
  });
}

await main();
