// One server as a process of its own, for the host bench (bench/host.ts starts it with
// --expose-gc, and --cpu-prof when profiling): a Gateway on the Redis given, or (`plain`) a bare
// `ws` server doing the same per frame — it parses each JSON frame and answers it (an ack with
// its ref) — and sending the same kind of welcome. Settings come as JSON in HOST_PROCESS; over
// IPC it says where it listens, answers `stats` with its memory and CPU (after two full
// collections when asked), writes a heap snapshot on `heap`, and exits on `stop` or when the
// bench goes away.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { writeHeapSnapshot } from "node:v8";
import { Redis } from "ioredis";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { Gateway, SUBPROTOCOLS } from "../src/gateway/index.js";
import { Rollcall, type RollcallOptions } from "../src/index.js";

export interface HostProcessConfig {
  redisUrl: string;
  engine: RollcallOptions;
  secret: string;
  plain: boolean;
}

export type ToHost =
  | { type: "stats"; gc: boolean }
  | { type: "heap"; path: string }
  /** Starts the CPU profiler, or stops it and writes its profile to `path`. */
  | { type: "profile"; path?: string }
  | { type: "stop" };

export interface HostStats {
  rss: number;
  heapUsed: number;
  external: number;
  /** process.cpuUsage(), user + system, µs since the process started. */
  cpuUs: number;
  /** Sockets open now. */
  connections: number;
  errors: number;
  firstError: string | null;
}

/** Frames are what is measured: the caps never refuse one. */
const LIMITS = {
  rateBurst: 1_000_000,
  ratePerSecond: 1_000_000,
  maxSockets: 50_000,
  maxSocketsPerUser: 64,
  maxSocketsPerAddress: 0,
};

const config = JSON.parse(process.env.HOST_PROCESS ?? "null") as HostProcessConfig;
let errors = 0;
let firstError: string | null = null;
const failed = (error: unknown) => {
  errors += 1;
  firstError ??= error instanceof Error ? error.message : String(error);
};
process.on("unhandledRejection", failed);

interface Server {
  port: number;
  connections(): number;
  close(): Promise<void>;
}

/** The plain server: every text frame parsed and answered with an ack of its ref. */
async function plainServer(): Promise<Server> {
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    perMessageDeflate: false,
    handleProtocols: (protocols) => SUBPROTOCOLS.find((p) => protocols.has(p)) ?? false,
  });
  let open = 0;
  let id = 0;
  function onMessage(this: WebSocket, data: RawData) {
    const frame = JSON.parse((data as Buffer).toString("utf8")) as { ref?: string };
    this.send(JSON.stringify({ type: "ack", ref: frame.ref }), { binary: false });
  }
  function onClose() {
    open -= 1;
  }
  const server = createServer();
  server.on("upgrade", (request, socket, head) => {
    wss.handleUpgrade(request, socket, head, (ws) => {
      open += 1;
      ws.on("message", onMessage);
      ws.on("close", onClose);
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

async function gatewayServer(): Promise<Server> {
  const redis = new Redis(config.redisUrl);
  const rollcall = new Rollcall(redis, config.engine);
  await rollcall.ready();
  const gateway = new Gateway(rollcall, {
    jwt: { secret: config.secret },
    sweeper: false,
    pingMs: 3_600_000,
    limits: LIMITS,
  });
  gateway.on("error", failed);
  const { port } = await gateway.listen(0);
  return {
    port,
    connections: () => gateway.connections,
    close: async () => {
      await gateway.close();
      redis.disconnect();
    },
  };
}

const server = config.plain ? await plainServer() : await gatewayServer();
const collect = (global as { gc?: () => void }).gc;

function stats(gc: boolean): HostStats {
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
    external: m.external,
    cpuUs: cpu.user + cpu.system,
    connections: server.connections(),
    errors,
    firstError,
  };
}

let stopping = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(0), 5_000).unref();
  void server
    .close()
    .catch(() => undefined)
    // process.exit writes a --cpu-prof profile too.
    .finally(() => process.exit(0));
}

let inspector: Session | undefined;
/** Starts the profiler, or (given a path) stops it and writes what it took there. */
async function profile(path: string | undefined): Promise<void> {
  if (path === undefined) {
    inspector = new Session();
    inspector.connect();
    await inspector.post("Profiler.enable");
    await inspector.post("Profiler.start");
    return;
  }
  const taken = await inspector?.post("Profiler.stop");
  if (taken) writeFileSync(path, JSON.stringify(taken.profile));
  inspector?.disconnect();
  inspector = undefined;
}

process.on("message", (message: { id: number; request: ToHost }) => {
  const { id, request } = message;
  void (async () => {
    let reply: unknown = null;
    if (request.type === "stats") reply = stats(request.gc);
    else if (request.type === "heap") reply = writeHeapSnapshot(request.path);
    else if (request.type === "profile") await profile(request.path);
    else stop();
    process.send?.({ id, reply });
  })();
});
process.on("disconnect", stop);
process.on("SIGTERM", stop);
process.send?.({ id: -1, reply: { port: server.port } });
