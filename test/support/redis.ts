import { Redis, type RedisOptions } from "ioredis";
import "./clock.js";
import { startEmbeddedRedis, type EmbeddedRedis } from "../../src/dev/embedded.js";
import { parseEvent, type PresenceEvent } from "../../src/protocol/events.js";

let embedded: EmbeddedRedis | undefined;
const clients = new Set<Redis>();
const owned = new Set<EmbeddedRedis>();

/** Root hooks: one throwaway redis-server for the run; every test starts on an empty one. */
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
  return events;
}

/** Waits until a condition holds (events travel asynchronously), failing after a while. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  ms = 5_000,
): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await sleep(5);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A redis-server of the test's own, to stop and start again on the same port. */
export async function ownRedis(): Promise<EmbeddedRedis> {
  const own = await startEmbeddedRedis();
  owned.add(own);
  return own;
}

/** Counts unhandled rejections while a test runs (mocha would also fail the run on one). */
export function watchUnhandled(): { count: () => number; stop: () => void } {
  let count = 0;
  const listener = () => (count += 1);
  process.on("unhandledRejection", listener);
  return { count: () => count, stop: () => process.off("unhandledRejection", listener) };
}

/** Leaves announced at once: the tests that are not about the leave grace go without one. */
export const IMMEDIATE = { leaveGraceMs: 0 } as const;
