import { expect } from "chai";
import type { Redis } from "ioredis";
import { Rollcall, RollcallError, Subscriber, Sweeper } from "../../src/index.js";
import { advanceClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";
import { IMMEDIATE, caughtUp, client, listen } from "../kit/redis.js";

/** Rejects with `code`, or fails the test. */
async function refusedWith(code: string, call: Promise<unknown>): Promise<void> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error, "the call was refused").to.be.instanceOf(RollcallError);
  expect((error as RollcallError).code).to.equal(code);
}

/** What the keys hold, by MEMORY USAGE: rollcall's data, without Redis's buffers. */
async function stored(redis: Redis): Promise<number> {
  let bytes = 0;
  for (const key of await redis.keys("*")) bytes += (await redis.memory("USAGE", key)) ?? 0;
  return bytes;
}

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info("memory"))![1]);
}

// Redis at maxmemory under noeviction: what frees memory and what reads goes on; what would grow
// it is refused with REDIS_OOM and changes nothing.
describe("Redis at its memory limit (noeviction)", () => {
  const WINDOW = 2_000;
  const OPTIONS = { ...IMMEDIATE, presenceWindowMs: WINDOW, typingWindowMs: 500 };
  let admin: Redis;

  beforeEach(async () => {
    admin = client();
    await admin.config("SET", "maxmemory-policy", "noeviction");
  });
  afterEach(async () => {
    await admin.config("SET", "maxmemory", "0");
  });

  /**
   * 2 MB that the test frees at will. Made in Redis: a 2 MB SET would leave a query buffer
   * that Redis frees later, lowering its memory under the limit the test sets.
   */
  async function ballast(): Promise<void> {
    await admin.eval("redis.call('SET', 'ballast', string.rep('x', 2097152))", 0);
  }

  /** Redis full from now on: the limit set below what it holds. */
  async function fill(): Promise<number> {
    const limit = (await usedMemory(admin)) - 1536 * 1024;
    await admin.config("SET", "maxmemory", String(limit));
    expect(await admin.set("probe", "x").catch((e: Error) => e.message)).to.match(/^OOM/);
    return limit;
  }

  it("refuses joins, new connections, bigger states and typing with REDIS_OOM, writing nothing", async () => {
    const rc = new Rollcall(client(), {
      ...IMMEDIATE,
      presenceWindowMs: WINDOW,
      typingWindowMs: 500,
    });
    // Memory a test's Redis holds beyond the rooms: the limit is set below all of it.
    await ballast();
    for (let i = 0; i < 20; i++) await rc.heartbeat("room", `u${i}`, "c", { state: { n: i } });
    const events = await listen([rc.channel("room")]);
    const before = await rc.roster("room");
    await fill();

    await refusedWith("REDIS_OOM", rc.heartbeat("room", "newcomer", "c"));
    await refusedWith("REDIS_OOM", rc.heartbeat("room", "u1", "second"));
    await refusedWith("REDIS_OOM", rc.heartbeat("room", "u2", "c", { state: { n: 2, more: "x" } }));
    await refusedWith("REDIS_OOM", rc.startTyping("room", "u3"));
    await refusedWith("REDIS_OOM", rc.setState("room", "u4", { n: 40 }));

    const after = await rc.roster("room");
    expect(after.members).to.deep.equal(before.members);
    expect(after.seq).to.equal(before.seq);
    await caughtUp(events);
    expect(events).to.deep.equal([]);
  });

  it("answers a batch per entry: steady beats applied, growth refused, nothing rejected", async () => {
    const rc = new Rollcall(client(), {
      ...IMMEDIATE,
      presenceWindowMs: WINDOW,
      typingWindowMs: 500,
    });
    await ballast();
    await rc.heartbeat("room", "ann", "c");
    await rc.heartbeat("other", "bob", "c");
    await fill();
    const outcomes = await rc.heartbeatMany([
      { room: "room", user: "ann", connection: "c" },
      { room: "room", user: "cid", connection: "c" },
      { room: "other", user: "bob", connection: "c" },
      { room: "other", user: "dan", connection: "c" },
    ]);
    const named = outcomes.map((o) => (o.error ? o.error.code : o.joined ? "joined" : "refreshed"));
    expect(named).to.deep.equal(["refreshed", "REDIS_OOM", "refreshed", "REDIS_OOM"]);
    expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["ann"]);
  });

  it("reads rosters and checks settings where Redis refuses writes (too few replicas)", async () => {
    const rc = new Rollcall(client(), OPTIONS);
    await rc.heartbeat("room", "ann", "c");
    await admin.config("SET", "min-replicas-to-write", "1");
    try {
      expect((await rc.roster("room")).count).to.equal(1);
      expect((await rc.count("room")).users).to.equal(1);
      await new Rollcall(client(), OPTIONS).ready();
      await refusedWith("REDIS_UNAVAILABLE", rc.heartbeat("room", "bob", "c"));
    } finally {
      await admin.config("SET", "min-replicas-to-write", "0");
    }
  });

  it("lets a watch open, follow the room and check it against Redis", async () => {
    const rc = new Rollcall(client(), OPTIONS);
    await ballast();
    for (const user of ["ann", "bob", "cid"]) await rc.heartbeat("room", user, "c");
    await fill();
    const subscriber = new Subscriber(rc);
    try {
      const watch = await subscriber.watch("room");
      expect(watch.synced).to.equal(true);
      await rc.leave("room", "bob", "c");
      await eventually(() => watch.roster.members.length === 2, 5_000, "bob's leave in the watch");
      expect(watch.roster.members.map((m) => m.user)).to.deep.equal(["ann", "cid"]);
      // The watch's check reads the room's mark: at the limit too.
      const mark = await rc.mark("room");
      expect(mark).to.deep.include({ count: 2, records: 2, seq: watch.roster.seq });
    } finally {
      subscriber.close();
    }
  });

  it("lets members leave, stop typing, be read and be swept; a member who beats stays", async () => {
    const redis = client();
    const rc = new Rollcall(redis, OPTIONS);
    await ballast();
    const users = Array.from({ length: 40 }, (_, i) => `u${i}`);
    for (const user of users) await rc.heartbeat("room", user, "c");
    await rc.startTyping("room", "u0");
    const events = await listen([rc.channel("room")]);
    // Each script Redis has not seen yet costs its source and its compiled code at its first
    // call (tens of kilobytes): these run once before the limit, as a long-lived fleet's have.
    const sweeper = new Sweeper(rc);
    await rc.leave("room", "nobody", "c");
    await rc.stopTyping("room", "nobody");
    await sweeper.sweepOnce();
    const limit = await fill();
    // So are the variants for the limit, at their first call there.
    await rc.heartbeat("room", "u2", "c");
    await rc.roster("room");
    const full = await stored(admin);

    expect((await rc.leave("room", "u1", "c")).left).to.equal(true);
    expect((await rc.stopTyping("room", "u0")).stopped).to.equal(true);
    expect((await rc.roster("room")).count).to.equal(39);
    expect((await rc.count("room")).users).to.equal(39);
    expect((await rc.stats()).reduce((sum, b) => sum + b.users, 0)).to.equal(39);

    // The window passes; only u2 keeps beating: the sweep drains the others, announcing each.
    // (The test's clock is a key: it moves with the limit lifted a moment.)
    const later = async (ms: number) => {
      await admin.config("SET", "maxmemory", "0");
      await advanceClock(redis, rc, ms);
      await admin.config("SET", "maxmemory", String(limit));
    };
    await later(WINDOW / 2);
    await rc.heartbeat("room", "u2", "c");
    await later(WINDOW / 2 + 100);
    await rc.heartbeat("room", "u2", "c");
    const pass = await sweeper.sweepOnce();
    expect(pass.leaves).to.equal(38);
    expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["u2"]);
    await caughtUp(events);
    const leaves = events.filter((e) => e.type === "leave").map((e) => e.user);
    expect(leaves).to.have.length(39);
    expect(leaves).not.to.include("u2");
    // What 40 calls wrote while over the limit, beside the records they removed: the replies
    // kept for resends (13 bytes an outcome, gone after the replay window) and the sweeps' note.
    expect((await stored(admin)) - full).to.be.below(4096);
    // Memory freed: a join gets in again.
    await admin.del("ballast");
    expect((await rc.heartbeat("room", "newcomer", "c")).joined).to.equal(true);
  });
});
