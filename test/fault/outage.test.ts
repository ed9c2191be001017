import { expect } from "chai";
import { Redis } from "ioredis";
import {
  COMMAND_TIMEOUT_MS,
  REDIS_OPTIONS,
  RedisCallError,
  Rollcall,
  Sweeper,
} from "../../src/index.js";
import { RedisProcess } from "../chaos/server.js";
import { freePort } from "../kit/ports.js";
import { IMMEDIATE } from "../kit/redis.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

/** Generous: a call settles within the command timeout; this only catches one that waits on. */
const BOUND_MS = 3 * COMMAND_TIMEOUT_MS;

/** How each call settled: its error's code, or `resolved`; and how long it took. */
async function settled(calls: (() => Promise<unknown>)[]): Promise<{ how: string; ms: number }[]> {
  return Promise.all(
    calls.map(async (call) => {
      const started = performance.now();
      const how = await call().then(
        () => "resolved",
        (error: unknown) => (error instanceof RedisCallError ? error.code : String(error)),
      );
      return { how, ms: performance.now() - started };
    }),
  );
}

/**
 * With the client settings the docs give (REDIS_OPTIONS), every call settles during an outage,
 * as REDIS_UNAVAILABLE, within the bound docs/operations.md states: against a Redis that is
 * stopped (SIGSTOP: the connection stays open, nothing answers), killed, or was never there.
 * Nothing is left unhandled, and calls go on once Redis is back.
 */
describe("calls bounded during an outage", () => {
  let server: RedisProcess;
  let redis: Redis;
  let unhandled: ReturnType<typeof watchUnhandled>;

  beforeEach(async () => {
    unhandled = watchUnhandled();
    server = await RedisProcess.start(false);
    redis = new Redis(server.url, REDIS_OPTIONS);
    redis.on("error", () => undefined); // the outage, said at every reconnect
  });

  afterEach(async () => {
    redis.disconnect();
    await server.stop(); // continues a stopped server first
    unhandled.stop();
  });

  /** A heartbeat, a roster and a sweep, started at once. */
  const threeCalls = (rc: Rollcall) => [
    () => rc.heartbeat("room", "bob", "c"),
    () => rc.roster("room"),
    () => rc.sweepBucket(rc.bucketOf("room")),
  ];

  it("rejects calls to a stopped Redis as REDIS_UNAVAILABLE within the bound", async () => {
    const rc = new Rollcall(redis, IMMEDIATE);
    await rc.heartbeat("room", "ann", "c");
    const failed: string[] = [];
    const sweeper = new Sweeper(rc, { intervalMs: 100, maxBackoffMs: 200 });
    sweeper.on("failed", (error) => failed.push(error.code));
    server.signal("SIGSTOP");
    let outcomes: { how: string; ms: number }[];
    try {
      sweeper.start();
      outcomes = await settled(threeCalls(rc));
      await eventually(() => failed.length > 0, BOUND_MS, "a failed sweep");
    } finally {
      server.signal("SIGCONT");
    }
    expect(outcomes.map((o) => o.how)).to.deep.equal(Array(3).fill("REDIS_UNAVAILABLE"));
    for (const { ms } of outcomes) expect(ms).to.be.below(BOUND_MS);
    expect(failed[0]).to.equal("REDIS_UNAVAILABLE");
    // Back: the calls go on, on the same connection. The heartbeat that timed out was written
    // to the stopped Redis, which ran it once continued: a failed call may still happen.
    expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
    await sweeper.stop();
    expect(unhandled.count()).to.equal(0);
  });

  it("rejects calls to a killed Redis, and to a closed port, within the bound", async () => {
    const rc = new Rollcall(redis, IMMEDIATE);
    await rc.heartbeat("room", "ann", "c");
    await server.kill();
    const killed = await settled(threeCalls(rc));
    const nowhere = new Redis(`redis://127.0.0.1:${await freePort()}`, REDIS_OPTIONS);
    nowhere.on("error", () => undefined);
    let closed: { how: string; ms: number }[];
    try {
      closed = await settled(threeCalls(new Rollcall(nowhere, IMMEDIATE)));
    } finally {
      nowhere.disconnect();
    }
    for (const outcomes of [killed, closed]) {
      expect(outcomes.map((o) => o.how)).to.deep.equal(Array(3).fill("REDIS_UNAVAILABLE"));
      for (const { ms } of outcomes) expect(ms).to.be.below(BOUND_MS);
    }
    // Restarted (empty: no persistence), the same client and Rollcall carry on.
    await server.launch();
    await eventually(
      async () => (await rc.heartbeat("room", "ann", "c").catch(() => null)) !== null,
    );
    expect(unhandled.count()).to.equal(0);
  });
});
