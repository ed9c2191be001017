import type { Redis } from "ioredis";
import type { Limits } from "../../src/gateway/index.js";
import {
  Rollcall,
  Subscriber,
  type PresenceEvent,
  type RollcallOptions,
  type Subscription,
} from "../../src/index.js";
import { sizeOf } from "./stormRooms.js";
import { eventually } from "./wait.js";
import { KitChild } from "./child.js";
import { GatewayChild, type GatewaySetup } from "./gatewayChild.js";
import type {
  StormClientsPoll,
  StormClientsRequest,
  StormClientsSettings,
} from "./stormClients.js";

const CLIENTS = "test/kit/stormClients.ts";

/**
 * A reconnect storm, end to end: two gateway processes on one Redis, each holding half
 * of the sockets of every room (each socket a user of its own, a browser client with its replica);
 * one is SIGKILLed, and its clients reconnect to the other with the client's own backoff and
 * jitter (a load balancer that sends every new socket to a live gateway). The clients live in
 * processes of their own (test/kit/stormClients.ts), a few thousand each, as they would on many
 * machines. The CI's fault test runs it with a few hundred sockets, the bench with 2 × 10,000.
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
  /** Client sockets per process (the storm's clients live in processes of their own). */
  socketsPerProcess?: number;
  /** Called every 100 ms from the SIGKILL until the end (the bench samples Redis). */
  sample?: () => Promise<void>;
}

export interface StormResult {
  sockets: number;
  rooms: number;
  /** Processes the clients lived in. */
  processes: number;
  /** Sockets of the killed gateway, all reconnected to the survivor. */
  reconnected: number;
  /** From the SIGKILL to the last of them open again, and to every replica matching its room. */
  reconnectMs: number;
  /** From the SIGKILL to half of them open again. */
  halfBackMs: number;
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
  const setup: GatewaySetup = {
    engine,
    limits: options.limits ?? {},
    gateway: { sweeper: true, ...options.gateway },
  };
  const [a, b] = await Promise.all([
    GatewayChild.start(options.redisUrl, false, setup),
    GatewayChild.start(options.redisUrl, false, setup),
  ]);
  const perProcess = options.socketsPerProcess ?? 5_000;
  const shares: KitChild[] = [];
  for (let from = 0; from < total; from += perProcess) {
    const share: StormClientsSettings = {
      from,
      to: Math.min(total, from + perProcess),
      total,
      roomSize,
      a: a.url,
      b: b.url,
    };
    shares.push(KitChild.start(CLIENTS, share));
  }
  const ask = <T>(request: StormClientsRequest) =>
    Promise.all(shares.map((share) => share.request<T>(request, timeoutMs)));
  const poll = async () => {
    const polls = await ask<StormClientsPoll>({ type: "poll" });
    return {
      converged: polls.every((p) => p.converged),
      back: polls.reduce((n, p) => n + p.back, 0),
      lastBackAt: Math.max(...polls.map((p) => p.lastBackAt)),
      errors: polls.reduce((n, p) => n + p.errors, 0),
      firstError: polls.find((p) => p.firstError !== null)?.firstError ?? null,
    };
  };
  const rollcall = new Rollcall(options.redis, engine);
  const subscriber = new Subscriber(rollcall);
  const subscriptions: Subscription[] = [];
  const stop = async () => {
    await Promise.all(shares.map((share) => share.kill()));
    await Promise.all(subscriptions.map((s) => s.close()));
    subscriber.close();
    await Promise.all([a.kill(), b.stop()]);
  };
  try {
    const published: PresenceEvent[] = [];
    for (let r = 0; r < rooms; r++) {
      subscriptions.push(await subscriber.subscribe(`storm-${r}`, (e) => published.push(e)));
    }
    const opening = Math.max(1, Math.floor((options.opening ?? 200) / shares.length));
    await ask({ type: "open", opening });
    await eventually(
      async () => (await poll()).converged,
      timeoutMs,
      "every replica whole before the storm",
    );
    await b.stats(false, true);
    const readsBefore = (await b.stats()).snapshotReads;

    // The storm: sockets opened from now on go to B, then A dies.
    published.length = 0;
    await ask({ type: "route-to-b" });
    const sampler = setInterval(() => void options.sample?.(), 100);
    const killedAt = performance.timeOrigin + performance.now();
    await a.kill();
    try {
      let last = await poll();
      await eventually(
        async () => (last = await poll()).back === socketsPerGateway,
        timeoutMs,
        "every socket back",
      );
      const reconnectMs = last.lastBackAt - killedAt;
      const backTimes = (await ask<number[]>({ type: "back-times" })).flat().sort((x, y) => x - y);
      const halfBackMs = backTimes[Math.floor((backTimes.length - 1) / 2)]! - killedAt;
      await eventually(
        async () => (last = await poll()).converged,
        timeoutMs,
        "every replica whole after the storm",
      );
      const convergeMs = performance.timeOrigin + performance.now() - killedAt;
      // The dead gateway's connections expire (the survivor's Sweeper) while their users stay.
      await eventually(
        async () => {
          const counts = await Promise.all(
            Array.from({ length: rooms }, (_, r) => rollcall.count(`storm-${r}`)),
          );
          return counts.every((c, r) => c.connections === sizeOf(`storm-${r}`, total, roomSize));
        },
        timeoutMs + (engine.presenceWindowMs ?? 45_000),
        "the dead gateway's connections expired",
      );
      // Every replica is the room's roster, read in pages.
      const replicas = await ask<Record<string, string[]>>({ type: "replicas" });
      for (let r = 0; r < rooms; r++) {
        const pages = await rollcall.rosterPages(`storm-${r}`);
        const users = pages.flatMap((p) => p.members.map((m) => m.user)).sort();
        for (const lists of replicas) {
          if ((lists[`storm-${r}`] ?? []).some((list) => list !== users.join())) {
            throw new Error(`a replica of storm-${r} differs`);
          }
        }
      }
      last = await poll();
      const after = await b.stats();
      return {
        sockets: total,
        rooms,
        processes: shares.length,
        reconnected: last.back,
        reconnectMs,
        halfBackMs,
        convergeMs,
        snapshotReads: after.snapshotReads - readsBefore,
        leaves: published.filter((e) => e.type === "leave").length,
        joins: published.filter((e) => e.type === "join").length,
        clientErrors: last.errors,
        gatewayErrors: after.errors,
        firstError: last.firstError ?? after.firstError,
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
