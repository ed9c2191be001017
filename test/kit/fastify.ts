// Fastify servers with rollcall/fastify, as an application runs them (@fastify/websocket
// registered with websocketOptions, an identity from a header its own hook would check), in the
// test's process or in one of their own (./fastifyServer.ts, to SIGKILL).
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance } from "fastify";
import { Redis, type RedisOptions } from "ioredis";
import {
  fastifyPresence,
  websocketOptions,
  type FastifyPresenceOptions,
} from "../../src/fastify/index.js";
import { Rollcall, type RollcallOptions } from "../../src/index.js";
import { BEARER_PROTOCOL } from "../../src/protocol/frames.js";
import { spawnServer, type ServerProcess } from "./serverProcess.js";

const SERVER = new URL("./fastifyServer.ts", import.meta.url).href;

export interface FastifyConfig {
  redisUrl: string;
  redisOptions?: RedisOptions;
  engine?: RollcallOptions;
  presence?: Partial<Omit<FastifyPresenceOptions, "rollcall" | "identify">>;
}

export interface FastifyInstanceUnderTest {
  readonly url: string;
  readonly port: number;
  readonly app: FastifyInstance;
  readonly rollcall: Rollcall;
  /** What the app logged as errors (rollcall reports there). */
  readonly errors: string[];
  close(): Promise<void>;
}

/**
 * An application: the user is the session token the browser client sends as its
 * `rollcall.bearer.<token>` subprotocol entry, `u.<user>` (a real one would look the session up;
 * none: refused), allowed in every room.
 */
export async function startFastify(config: FastifyConfig): Promise<FastifyInstanceUnderTest> {
  const redis = new Redis(config.redisUrl, config.redisOptions ?? {});
  redis.on("error", () => undefined); // an outage: the calls fail, rollcall reports them
  const rollcall = new Rollcall(redis, config.engine ?? {});
  const errors: string[] = [];
  const app = Fastify({
    logger: {
      level: "error",
      stream: { write: (line: string) => void errors.push(line) },
    },
  });
  await app.register(websocket, { options: websocketOptions(rollcall) });
  await app.register(fastifyPresence, {
    rollcall,
    identify: (request) => {
      const offered = String(request.headers["sec-websocket-protocol"] ?? "").split(",");
      const token = offered.map((p) => p.trim()).find((p) => p.startsWith(BEARER_PROTOCOL));
      const user = token?.slice(BEARER_PROTOCOL.length).match(/^u\.(.+)$/)?.[1];
      return user === undefined ? null : { user, rooms: ["*"] };
    },
    ...config.presence,
  });
  const address = await app.listen({ port: 0, host: "127.0.0.1" });
  const port = Number(new URL(address).port);
  return {
    url: `ws://127.0.0.1:${port}/presence`,
    port,
    app,
    rollcall,
    errors,
    async close() {
      await app.close();
      redis.disconnect();
    },
  };
}

/** Starts ./fastifyServer.ts with `config`; resolves once it listens. */
export async function spawnFastify(
  config: FastifyConfig,
): Promise<ServerProcess & { url: string }> {
  const server = await spawnServer(SERVER, { ROLLCALL_FASTIFY: JSON.stringify(config) });
  return { ...server, url: `ws://127.0.0.1:${server.port}/presence` };
}
