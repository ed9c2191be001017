// One demo gateway instance as a process: an http.Server that serves the demo page, the browser
// client's compiled modules (dist/client, dist/protocol: `make build`), a demo token endpoint,
// and the Gateway at /presence, on the Redis at REDIS_URL, with its own Sweeper.
//   tsx src/dev/gatewayServer.ts [port] [--fallback]   (port: PORT or 8081; --fallback: any
//   free port if that one is taken). Windows: DEMO_PRESENCE_MS, … (src/dev/instances.ts).
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { Redis } from "ioredis";
import { SignJWT } from "jose";
import { REDIS_OPTIONS } from "../engine/redisOptions.js";
import { Rollcall } from "../engine/rollcall.js";
import { Gateway } from "../gateway/index.js";
import { checkId } from "../protocol/ids.js";
import { engineOptions, windowsFrom } from "./instances.js";

/** The demo's signing secret: anyone may mint a token here, which is the point of a demo. */
export const DEMO_SECRET = "rollcall demo secret, not for production use";
const TOKEN_LIFETIME = "5m";
/**
 * Pages of this machine's demo instances, whichever port: a page served by one instance may open
 * its socket on the other. (A page of its own origin always may; a real deployment lists its
 * sites, never a pattern this wide.)
 */
const DEMO_ORIGINS = /^http:\/\/(?:127\.0\.0\.1|localhost):\d{1,5}$/;

const PAGE = fileURLToPath(new URL("./page/", import.meta.url));
const DIST = fileURLToPath(new URL("../../dist/", import.meta.url));
const PAGE_FILES: Record<string, string> = { "/": "index.html", "/app.js": "app.js" };
/** The browser client and the isomorphic protocol modules it imports, as tsc emitted them. */
const MODULE = /^\/(client|protocol)\/([A-Za-z]+\.js(?:\.map)?)$/;

function mintToken(user: string): Promise<string> {
  return new SignJWT({ rooms: ["*"] })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(user)
    .setIssuedAt()
    .setExpirationTime(TOKEN_LIFETIME)
    .sign(new TextEncoder().encode(DEMO_SECRET));
}

async function serveFile(response: ServerResponse, path: string): Promise<void> {
  const type = path.endsWith(".html")
    ? "text/html; charset=utf-8"
    : path.endsWith(".map")
      ? "application/json"
      : "text/javascript; charset=utf-8";
  let body: Buffer;
  try {
    body = await readFile(path);
  } catch {
    const hint = path.startsWith(DIST) ? " (build the client first: make build)" : "";
    response.writeHead(404, { "Content-Type": "text/plain" }).end(`not found${hint}\n`);
    return;
  }
  response.writeHead(200, { "Content-Type": type, "Cache-Control": "no-store" }).end(body);
}

/** rollcall's metrics, through OpenTelemetry's SDK, in Prometheus's text format at /metrics. */
const metrics = new PrometheusExporter({ preventServerStart: true });
const meter = new MeterProvider({ readers: [metrics] }).getMeter("rollcall");

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? "/", "http://localhost");
  if (url.pathname === "/metrics") return metrics.getMetricsRequestHandler(request, response);
  const page = PAGE_FILES[url.pathname];
  const module = MODULE.exec(url.pathname);
  if (request.method !== "GET") {
    response.writeHead(405, { Allow: "GET" }).end();
  } else if (page) {
    await serveFile(response, PAGE + page);
  } else if (module) {
    await serveFile(response, `${DIST}${module[1]}/${module[2]}`);
  } else if (url.pathname === "/token") {
    let user: string;
    try {
      user = checkId("user", url.searchParams.get("user") ?? "");
    } catch (error) {
      response
        .writeHead(400, { "Content-Type": "text/plain" })
        .end(`${(error as Error).message}\n`);
      return;
    }
    const token = await mintToken(user);
    response
      .writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-store" })
      .end(JSON.stringify({ token }));
  } else {
    response.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
  }
}

function listen(server: Server, port: number, fallback: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE" && fallback && port !== 0) {
        resolve(listen(server, 0, false));
      } else reject(error);
    };
    server.once("error", onError);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const port = Number(args.find((a) => !a.startsWith("--")) ?? process.env.PORT ?? 8081);
  const windows = windowsFrom();
  // Auto-pipelining: a gateway makes many small calls at once (every socket's heartbeats).
  const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", {
    ...REDIS_OPTIONS,
    enableAutoPipelining: true,
  });
  // ioredis retries on its own: say so once per outage, not at every attempt.
  let down = false;
  redis.on("error", (error: Error) => {
    if (!down) console.error(`[gateway :${port}] Redis: ${error.message}; retrying`);
    down = true;
  });
  redis.on("ready", () => (down = false));
  const rollcall = new Rollcall(redis, { ...engineOptions(windows), meter });
  await rollcall.ready();
  const gateway = new Gateway(rollcall, {
    jwt: { secret: DEMO_SECRET },
    sweeper: { intervalMs: windows.sweepMs },
    heartbeatMs: windows.heartbeatMs,
    pingMs: windows.pingMs,
    origins: (origin) => DEMO_ORIGINS.test(origin),
    // A demo: anyone may follow anyone's online status (a real deployment asks whom they know).
    authorizeUsers: () => true,
  });
  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      console.error(error);
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  gateway.attach(server);
  const actual = await listen(server, port, args.includes("--fallback"));
  gateway.on("error", (error) => console.error(`[gateway :${actual}] ${error.message}`));
  if (!existsSync(`${DIST}client/index.js`)) {
    console.error(`[gateway :${actual}] dist/client is missing: run make build, then reload`);
  }

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // Redis may be stopping too (Ctrl-C reaches the whole process group): do not wait forever.
    setTimeout(() => process.exit(0), 3_000).unref();
    void gateway
      .close()
      .catch((error: unknown) => console.error(error))
      .finally(() => {
        server.closeAllConnections();
        server.close();
        redis.disconnect();
        process.exit(0);
      });
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  // Started by the demo or a test: tell it the port, and go when it goes.
  if (process.send) {
    process.send({ type: "listening", port: actual });
    process.on("disconnect", stop);
  } else {
    console.log(`gateway on http://127.0.0.1:${actual}/ (Redis ${process.env.REDIS_URL ?? ""})`);
  }
}

await main();
