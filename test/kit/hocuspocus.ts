// Hocuspocus instances for the tests of rollcall/hocuspocus: a Server with
// @hocuspocus/extension-redis and the presence extension, in the test's process or in a process of
// its own (./hocuspocusServer.ts, to SIGKILL), and providers over `ws`.
import { Redis as RedisExtension } from "@hocuspocus/extension-redis";
import { HocuspocusProvider, HocuspocusProviderWebsocket } from "@hocuspocus/provider";
import { Server } from "@hocuspocus/server";
import { Redis, type RedisOptions } from "ioredis";
import WebSocket from "ws";
import * as Y from "yjs";
import { HocuspocusPresence, type HocuspocusPresenceOptions } from "../../src/hocuspocus/index.js";
import { Rollcall, type RollcallOptions } from "../../src/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { spawnServer, type ServerProcess } from "./serverProcess.js";

/** The recommended settings of docs/integrations.md: a 10 s presence window and a 2 s grace. */
export const ENGINE: RollcallOptions = {
  presenceWindowMs: 10_000,
  leaveGraceMs: 2_000,
  typingWindowMs: 5_000,
  keyTtlMs: 60_000,
};
/** Real-time intervals kept short, so that time moved on the test clock is soon heartbeated over. */
export const FAST: HocuspocusPresenceOptions = {
  heartbeatMs: 200,
  sweeper: { intervalMs: 100, reconcileMs: 0 },
};

export interface Instance {
  readonly url: string;
  readonly server: Server;
  readonly presence: HocuspocusPresence;
  readonly rollcall: Rollcall;
  /** Every event the presence extension emitted, with its document. */
  readonly events: { event: PresenceEvent; doc: string }[];
  readonly errors: Error[];
  stop(): Promise<void>;
}

/**
 * A Hocuspocus server on a free port with extension-redis (unless `relay` is false) and the
 * presence extension; the user of a connection is its token (onAuthenticate puts it in the
 * context).
 */
export async function startInstance(
  redisUrl: string,
  options: { presence?: HocuspocusPresenceOptions; redis?: RedisOptions; relay?: boolean } = {},
): Promise<Instance> {
  const redis = new Redis(redisUrl, options.redis ?? {});
  redis.on("error", () => undefined);
  const rollcall = new Rollcall(redis, ENGINE);
  const presence = new HocuspocusPresence(rollcall, options.presence ?? FAST);
  const events: Instance["events"] = [];
  const errors: Error[] = [];
  presence.on("event", (event, doc) => events.push({ event, doc }));
  presence.on("error", (error) => errors.push(error));
  const server = new Server({
    port: 0,
    address: "127.0.0.1",
    quiet: true,
    stopOnSignals: false,
    extensions: [...(options.relay === false ? [] : [new RedisExtension({ redis })]), presence],
    onAuthenticate: ({ token }) => Promise.resolve({ user: { id: token } }),
  });
  await server.listen();
  return {
    url: `ws://127.0.0.1:${server.address.port}`,
    server,
    presence,
    rollcall,
    events,
    errors,
    async stop() {
      await server.destroy();
      redis.disconnect();
    },
  };
}

const SERVER = new URL("./hocuspocusServer.ts", import.meta.url).href;

export type InstanceProcess = ServerProcess & { readonly url: string };

/** The same, in a process of its own. */
export async function spawnInstance(redisUrl: string): Promise<InstanceProcess> {
  const server = await spawnServer(SERVER, { REDIS_URL: redisUrl });
  return { ...server, url: `ws://127.0.0.1:${server.port}` };
}

/**
 * A provider over `ws` for a user (its token) in a document, with its own Y.Doc and websocket:
 * destroying the provider destroys its websocket too (a websocket given to a provider outlives
 * it, reconnecting for ever, and would keep the test process alive).
 */
export function provider(url: string, doc: string, user: string): HocuspocusProvider {
  const websocketProvider = new HocuspocusProviderWebsocket({
    url,
    WebSocketPolyfill: WebSocket,
    delay: 50,
    minDelay: 50,
    maxDelay: 200,
  });
  const p = new HocuspocusProvider({
    websocketProvider,
    name: doc,
    token: user,
    document: new Y.Doc(),
  });
  p.attach();
  const destroy = p.destroy.bind(p);
  p.destroy = () => {
    destroy();
    websocketProvider.destroy();
  };
  return p;
}
