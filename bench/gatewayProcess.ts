// One gateway instance as a process of its own, for the bench (bench/gateway.ts starts it with
// --expose-gc): a Gateway listening on a free port, on the Redis and with the settings given as
// JSON in BENCH_GATEWAY, no Sweeper. Over IPC it says where it listens, answers `stats` with its
// memory and CPU (after a full collection when asked), and closes on `stop` or when the bench
// goes away.
import { Redis } from "ioredis";
import { Gateway, type Limits } from "../src/gateway/index.js";
import { Rollcall, type RollcallOptions } from "../src/index.js";

export interface GatewayProcessConfig {
  redisUrl: string;
  engine: RollcallOptions;
  secret: string;
  limits: Partial<Limits>;
  pingMs: number;
}

export type ToGateway = { type: "stats"; id: number; gc: boolean } | { type: "stop" };

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
}

export type FromGateway =
  { type: "listening"; port: number } | { type: "stats"; id: number; stats: GatewayStats };

function send(message: FromGateway): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.BENCH_GATEWAY ?? "") as GatewayProcessConfig;
  const redis = new Redis(config.redisUrl);
  const rollcall = new Rollcall(redis, config.engine);
  await rollcall.ready();
  const gateway = new Gateway(rollcall, {
    jwt: { secret: config.secret },
    sweeper: false,
    pingMs: config.pingMs,
    limits: config.limits,
  });
  let errors = 0;
  let firstError: string | null = null;
  gateway.on("error", (error) => {
    errors += 1;
    firstError ??= error.message;
  });
  const { port } = await gateway.listen(0);

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
      connections: gateway.connections,
      errors,
      firstError,
    };
  };

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(0), 5_000).unref();
    void gateway
      .close()
      .catch(() => undefined)
      .finally(() => {
        redis.disconnect();
        process.exit(0);
      });
  };
  process.on("message", (message: ToGateway) => {
    if (message.type === "stats") send({ type: "stats", id: message.id, stats: stats(message.gc) });
    else if (message.type === "stop") stop();
  });
  process.on("disconnect", stop);
  process.on("SIGTERM", stop);
  send({ type: "listening", port });
}

await main();
