import type { Redis } from "ioredis";
import WebSocket from "ws";
import { RollcallClient, type Room } from "../../src/client/index.js";
import type { Limits } from "../../src/gateway/index.js";
import {
  Rollcall,
  Subscriber,
  type PresenceEvent,
  type RollcallOptions,
  type Subscription,
} from "../../src/index.js";
import { eventually } from "./wait.js";
import { GatewayChild, token, type GatewaySetup } from "./gatewayChild.js";

/**
 * A reconnect storm, end to end: two gateway processes on one Redis, each holding half
 * of the sockets of every room (each socket a user of its own, a browser client with its replica);
 * one is SIGKILLed, and its clients reconnect to the other with the client's own backoff and
 * jitter (a load balancer that sends every new socket to a live gateway). The CI's fault test runs
 * it with a few hundred sockets, the bench with thousands.
 */

export interface StormOptions {
  redisUrl: string;
  /** An observer's connection to the same Redis (the caller's; left open). */
  redis: Redis;
  socketsPerGateway: number;
  /** Members of each room: half on each gateway. */
  roomSize: number;
  /** The deployment's settings (a prefix of its own); the leave grace stays the default. */
  engine: RollcallOptions;
  /** How long reconnecting and converging may take before the run fails. */
  timeoutMs: number;
  gateway?: GatewaySetup["gateway"];
  limits?: Partial<Limits>;
  /** Sockets opened (and joined) at once while the rooms fill. */
  opening?: number;
  /** Called every 100 ms from the SIGKILL until the end (the bench samples Redis). */
  sample?: () => Promise<void>;
}

export interface StormResult {
  sockets: number;
  rooms: number;
  /** Sockets of the killed gateway, all reconnected to the survivor. */
  reconnected: number;
  /** From the SIGKILL to the last of them open again, and to every replica matching its room. */
  reconnectMs: number;
  convergeMs: number;
  /** The survivor's snapshot reads for the rejoins (sockets that join together share one). */
  snapshotReads: number;
  /** Joins and leaves published from the SIGKILL to the end: a user back in time has neither. */
  leaves: number;
  joins: number;
  /** Error frames and failures the clients heard; errors and unhandled rejections in the survivor. */
  clientErrors: number;
  gatewayErrors: number;
  firstError: string | null;
  unhandled: number;
  /** The survivor's event-loop delay over the storm, ms. */
  loopDelay: { p50: number; p99: number; max: number };
}

export async function storm(options: StormOptions): Promise<StormResult> {
  const { socketsPerGateway, roomSize, engine, timeoutMs } = options;
  const total = 2 * socketsPerGateway;
  const rooms = Math.ceil(total / roomSize);
  const roomOf = (i: number) => `storm-${Math.floor(i / roomSize)}`;
  const setup: GatewaySetup = {
    engine,
    limits: options.limits ?? {},
    gateway: { sweeper: true, ...options.gateway },
  };
  const [a, b] = await Promise.all([
    GatewayChild.start(options.redisUrl, false, setup),
    GatewayChild.start(options.redisUrl, false, setup),
  ]);
  const rollcall = new Rollcall(options.redis, engine);
  const subscriber = new Subscriber(rollcall);
  const subscriptions: Subscription[] = [];
  const clients: RollcallClient[] = [];
  const stop = async () => {
    for (const client of clients) client.close();
    await Promise.all(subscriptions.map((s) => s.close()));
    subscriber.close();
    await Promise.all([a.kill(), b.stop()]);
  };
  try {
    // Socket i goes to gateway i % 2 while A lives, then to B: what a load balancer does.
    let killed = false;
    const route = (i: number) => (i % 2 === 0 && !killed ? a.url : b.url);
    class Routed extends WebSocket {
      constructor(url: string, protocols: string[]) {
        super(route(Number(new URL(url).pathname.slice(1))), protocols, {
          perMessageDeflate: false,
        });
      }
    }
    const published: PresenceEvent[] = [];
    for (let r = 0; r < rooms; r++) {
      subscriptions.push(await subscriber.subscribe(`storm-${r}`, (e) => published.push(e)));
    }
    let clientErrors = 0;
    let firstError: string | null = null;
    const joined: Room[] = [];
    const opening = options.opening ?? 200;
    for (let from = 0; from < total; from += opening) {
      const batch = Array.from({ length: Math.min(opening, total - from) }, (_, k) => from + k);
      const ready = batch.map((i) => {
        const user = `s${i}`;
        const client = new RollcallClient(`ws://storm/${i}`, {
          token: () => token(user),
          WebSocket: Routed as unknown as typeof globalThis.WebSocket,
        });
        client.on("error", (error) => {
          clientErrors += 1;
          firstError ??= `client: ${error.message}`;
        });
        clients.push(client);
        return client.join(roomOf(i));
      });
      joined.push(...(await Promise.all(ready)));
    }
    const converged = () =>
      joined.every((room) => room.synced && room.roster.members.length === sizeOf(room.room));
    const sizeOf = (room: string) =>
      Math.min(roomSize, total - roomSize * Number(room.slice("storm-".length)));
    await eventually(converged, timeoutMs, "every replica whole before the storm");
    await b.stats(false, true);
    const readsBefore = (await b.stats()).snapshotReads;

    // The storm.
    published.length = 0;
    const victims = clients.filter((_, i) => i % 2 === 0);
    const openedAt = new Map<RollcallClient, number>();
    for (const client of victims) {
      client.on("status", (status) => {
        if (status === "open" && killed) openedAt.set(client, performance.now());
      });
    }
    const sampler = setInterval(() => void options.sample?.(), 100);
    const killedAt = performance.now();
    killed = true;
    await a.kill();
    try {
      await eventually(() => openedAt.size === victims.length, timeoutMs, "every socket back");
      const reconnectMs = Math.max(...openedAt.values()) - killedAt;
      await eventually(converged, timeoutMs, "every replica whole after the storm");
      const convergeMs = performance.now() - killedAt;
      // The dead gateway's connections expire (the survivor's Sweeper) while their users stay.
      await eventually(
        async () => {
          const counts = await Promise.all(
            Array.from({ length: rooms }, (_, r) => rollcall.count(`storm-${r}`)),
          );
          return counts.every((c, r) => c.connections === sizeOf(`storm-${r}`));
        },
        timeoutMs + (engine.presenceWindowMs ?? 45_000),
        "the dead gateway's connections expired",
      );
      // Every replica is the room's roster, read in pages.
      for (let r = 0; r < rooms; r++) {
        const pages = await rollcall.rosterPages(`storm-${r}`);
        const users = pages.flatMap((p) => p.members.map((m) => m.user)).sort();
        for (const room of joined.filter((j) => j.room === `storm-${r}`)) {
          const replica = room.roster.members.map((m) => m.user).sort();
          if (replica.join() !== users.join()) throw new Error(`a replica of storm-${r} differs`);
        }
      }
      const after = await b.stats();
      return {
        sockets: total,
        rooms,
        reconnected: victims.length,
        reconnectMs,
        convergeMs,
        snapshotReads: after.snapshotReads - readsBefore,
        leaves: published.filter((e) => e.type === "leave").length,
        joins: published.filter((e) => e.type === "join").length,
        clientErrors,
        gatewayErrors: after.errors,
        firstError: firstError ?? after.firstError,
        unhandled: after.unhandled,
        loopDelay: after.loopDelay,
      };
    } finally {
      clearInterval(sampler);
    }
  } finally {
    await stop();
  }
}
