// Socket.IO servers with rollcall presence, as an application runs them (an http.Server, the
// Redis adapter when asked, a middleware naming the user), and socket.io-client sockets.
import { createAdapter } from "@socket.io/redis-adapter";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Cluster, Redis, type RedisOptions } from "ioredis";
import { Server, type ServerOptions } from "socket.io";
import { io as ioClient, type Socket as ClientSocket } from "socket.io-client";
import { Rollcall, type RollcallOptions } from "../../src/index.js";
import { SocketIoPresence, type SocketIoPresenceOptions } from "../../src/socketio/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import type { ReplicaRoster } from "../../src/protocol/replica.js";
import { spawnServer, type ServerProcess } from "./serverProcess.js";

/** The windows the docs recommend for the integrations. */
export const RECOMMENDED = {
  presenceWindowMs: 10_000,
  leaveGraceMs: 2_000,
  typingWindowMs: 5_000,
} as const satisfies RollcallOptions;

export interface IoConfig {
  redisUrl?: string;
  /** Redis Cluster nodes instead of redisUrl. */
  cluster?: { host: string; port: number }[];
  /** Options of the Rollcall's connection (e.g. fail fast in an outage). */
  redisOptions?: RedisOptions;
  engine?: RollcallOptions;
  /** Socket.IO's Redis adapter between the instances. */
  adapter?: boolean;
  recovery?: boolean;
  presence?: Partial<Omit<SocketIoPresenceOptions, "user" | "subscriber">>;
}

export interface IoInstance {
  readonly url: string;
  readonly port: number;
  readonly io: Server;
  readonly rollcall: Rollcall;
  readonly presence: SocketIoPresence;
  readonly errors: Error[];
  close(): Promise<void>;
}

/**
 * An application's Socket.IO server: the user comes from `auth.user` (a real application would
 * check a token there), the socket joins and leaves rooms when it asks (`join`, `leave`), and
 * presence follows those rooms.
 */
export async function startIo(config: IoConfig, port = 0, http?: HttpServer): Promise<IoInstance> {
  const redis: Redis | Cluster = config.cluster
    ? new Cluster(config.cluster)
    : new Redis(config.redisUrl ?? "", config.redisOptions ?? {});
  redis.on("error", () => undefined); // an outage: the calls fail, presence reports them
  const options: Partial<ServerOptions> = {};
  const adapterClients: (Redis | Cluster)[] = [];
  if (config.adapter) {
    const connect = () =>
      config.cluster
        ? new Cluster(config.cluster)
        : new Redis(config.redisUrl ?? "", config.redisOptions ?? {});
    const [pub, sub] = [connect(), connect()];
    for (const c of [pub, sub]) c.on("error", () => undefined);
    adapterClients.push(pub, sub);
    options.adapter = createAdapter(pub, sub);
  }
  if (config.recovery) {
    options.connectionStateRecovery = { maxDisconnectionDuration: 60_000 };
  }
  const server = http ?? createServer();
  const io = new Server(server, options);
  io.use((socket, next) => {
    const user = (socket.handshake.auth as { user?: unknown }).user;
    if (typeof user === "string") (socket.data as { user?: string }).user = user;
    next();
  });
  io.on("connection", (socket) => {
    socket.on("join", async (room: string, ack?: () => void) => {
      await socket.join(room);
      ack?.();
    });
    socket.on("leave", async (room: string, ack?: () => void) => {
      await socket.leave(room);
      ack?.();
    });
  });
  const rollcall = new Rollcall(redis, { ...RECOMMENDED, ...config.engine });
  const presence = new SocketIoPresence(io.of("/"), rollcall, {
    user: (socket) => (socket.data as { user?: string }).user,
    ...config.presence,
  });
  const errors: Error[] = [];
  presence.on("error", (error) => errors.push(error));
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    io,
    rollcall,
    presence,
    errors,
    async close() {
      await presence.close();
      await io.close();
      redis.disconnect();
      for (const c of adapterClients) c.disconnect();
    },
  };
}

/** A socket.io-client socket of a user (none: an observer), and what it heard. */
export interface IoClient {
  readonly socket: ClientSocket;
  readonly events: PresenceEvent[];
  readonly snapshots: ReplicaRoster[];
  readonly errors: { code: string; message: string; room?: string }[];
  join(room: string): Promise<void>;
  leave(room: string): Promise<void>;
  /** Emits a client event and resolves with its ack. */
  call(event: string, ...args: unknown[]): Promise<{ ok: boolean; code?: string }>;
}

export function connectIo(url: string, user: string | null): IoClient {
  const socket = ioClient(url, {
    auth: user === null ? {} : { user },
    transports: ["websocket"],
    reconnectionDelay: 50,
    reconnectionDelayMax: 200,
  });
  const client: IoClient = {
    socket,
    events: [],
    snapshots: [],
    errors: [],
    join: (room) => new Promise((resolve) => socket.emit("join", room, () => resolve())),
    leave: (room) => new Promise((resolve) => socket.emit("leave", room, () => resolve())),
    call: (event, ...args) =>
      new Promise((resolve) =>
        socket.emit(event, ...args, (reply: { ok: boolean }) => resolve(reply)),
      ),
  };
  socket.on("rollcall:event", (event: PresenceEvent) => client.events.push(event));
  socket.on("rollcall:snapshot", (snapshot: ReplicaRoster) => client.snapshots.push(snapshot));
  socket.on("rollcall:error", (error: IoClient["errors"][number]) => client.errors.push(error));
  return client;
}

/** What a client heard of a room, as `type:user` lines. */
export function heard(client: IoClient, room: string): string[] {
  return client.events.filter((e) => e.room === room).map((e) => `${e.type}:${e.user}`);
}

/** An instance as a process of its own (./socketioServer.ts), to SIGKILL. */
export type IoProcess = ServerProcess & { readonly url: string };

const SERVER = new URL("./socketioServer.ts", import.meta.url).href;

/** Starts `server` (by default ./socketioServer.ts), which reads its config from ROLLCALL_IO. */
export async function spawnIo(config: IoConfig, server = SERVER): Promise<IoProcess> {
  const started = await spawnServer(server, { ROLLCALL_IO: JSON.stringify(config) });
  return { ...started, url: `http://127.0.0.1:${started.port}` };
}
