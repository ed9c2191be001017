import { Redis, type RedisOptions } from "ioredis";
import "./clock.js";
import { startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded.js";
import { parseEvent, type PresenceEvent } from "../../src/protocol/events.js";

let embedded: EmbeddedRedis | undefined;
const clients = new Set<Redis>();
const owned = new Set<EmbeddedRedis>();
/** The connection each listen() array is filled from. */
const listeners = new WeakMap<readonly PresenceEvent[], Redis>();

/**
 * Root hooks of the suites that need Redis (the root .mocharc.json loads this file; test/unit's
 * configuration does not): one throwaway redis-server per test file (mocha runs the files in
 * parallel worker processes), emptied before each test.
 */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    embedded = await startEmbeddedRedis();
  },
  async beforeEach() {
    const admin = client();
    await admin.flushall();
    await admin.script("FLUSH");
    await admin.config("RESETSTAT");
  },
  async afterEach() {
    for (const c of clients) c.disconnect();
    clients.clear();
    for (const own of owned) await own.stop();
    owned.clear();
  },
  async afterAll() {
    await embedded?.stop();
  },
};

export function redisUrl(): string {
  if (!embedded) throw new Error("the embedded redis-server is not running");
  return embedded.url;
}

/** A new connection, closed after the test: each one stands for a separate server instance. */
export function client(options: RedisOptions = {}): Redis {
  const c = new Redis(redisUrl(), options);
  clients.add(c);
  return c;
}

/** Collects the events published on some channels, as a subscriber on its own connection sees them. */
export async function listen(channels: string[]): Promise<PresenceEvent[]> {
  const sub = client();
  const events: PresenceEvent[] = [];
  sub.on("smessage", (_channel: string, message: string) => events.push(parseEvent(message)));
  for (const channel of channels) await sub.ssubscribe(channel);
  listeners.set(events, sub);
  return events;
}

/**
 * Resolves once every event published before the call is in `events` (an array from listen()):
 * a PING on the listener's connection is answered after the messages Redis queued before it.
 */
export async function caughtUp(events: readonly PresenceEvent[]): Promise<void> {
  const sub = listeners.get(events);
  if (!sub) throw new Error("not an array from listen()");
  await sub.ping();
}

/** Redis's clock in ms, as the scripts read it (TIME). */
export async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
}

/** A redis-server of the test's own, to stop and start again on the same port. */
export async function ownRedis(): Promise<EmbeddedRedis> {
  const own = await startEmbeddedRedis();
  owned.add(own);
  return own;
}

/** Leaves announced at once: the tests that are not about the leave grace go without one. */
export const IMMEDIATE = { leaveGraceMs: 0 } as const;
