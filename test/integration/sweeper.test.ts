import { expect } from "chai";
import { Redis } from "ioredis";
import { RedisCallError, Rollcall, Sweeper, type PassStats } from "../../src/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { startProxy, isEvalOf } from "../kit/proxy.js";
import { caughtUp, IMMEDIATE, client, listen, ownRedis, redisUrl } from "../kit/redis.js";
import { advanceClock } from "../kit/clock.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

const OPTIONS = { presenceWindowMs: 2_000, typingWindowMs: 300, keyTtlMs: 6_000 };

const roomsOf = (n: number) => Array.from({ length: n }, (_, i) => `room${i}`);

/** A subscriber to many rooms' channels; it sees what any other instance would see. */
function listenTo(rc: Rollcall, rooms: string[]): Promise<PresenceEvent[]> {
  return listen(rooms.map((room) => rc.channel(room)));
}

const keyOf = (e: PresenceEvent) => `${e.type}|${e.room}|${e.user}`;

describe("Sweeper", () => {
  it("4 racing sweepers announce each of 10,000 expiries in 1,000 rooms exactly once", async function () {
    this.timeout(60_000);
    const writer = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
    const rooms = roomsOf(1_000);
    const expiring = rooms.flatMap((room) =>
      Array.from({ length: 10 }, (_, i) => ({ room, user: `gone${i}` })),
    );
    const live = rooms.map((room) => ({ room, user: "stays" }));
    const events = await listenTo(writer, rooms);
    const beat = (members: { room: string; user: string }[]) =>
      Promise.all(members.map(({ room, user }) => writer.heartbeat(room, user, "c")));
    // The expiring members' window passes at once; the live ones join after, and beat on while
    // the sweepers race.
    await beat(expiring);
    await advanceClock(writer.redis, writer, OPTIONS.presenceWindowMs + 1);
    await beat(live);
    const keepAlive = setInterval(() => void beat(live), 400);
    await eventually(() => events.length === expiring.length + live.length, 20_000);
    events.length = 0;

    const sweepers = Array.from(
      { length: 4 },
      () => new Sweeper(new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS }), { intervalMs: 100 }),
    );
    const passes: PassStats[] = [];
    try {
      for (const s of sweepers) {
        s.on("pass", (p) => passes.push(p));
        s.start();
      }
      await eventually(() => events.length >= expiring.length, 30_000);
    } finally {
      await Promise.all(sweepers.map((s) => s.stop()));
      clearInterval(keepAlive);
    }
    await caughtUp(events); // what the sweepers published, duplicates included

    expect(events.map(keyOf).sort()).to.deep.equal(
      expiring.map(({ room, user }) => `leave|${room}|${user}`).sort(),
    );
    expect(passes.reduce((sum, p) => sum + p.leaves, 0)).to.equal(expiring.length);
    const roster = await writer.roster("room7");
    expect(roster.members.map((m) => m.user)).to.deep.equal(["stays"]);
  });

  it("stops each expired typist exactly once", async () => {
    const writer = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
    const rooms = roomsOf(20);
    const typists = rooms.flatMap((room) => ["a", "b", "c"].map((user) => ({ room, user })));
    for (const { room, user } of typists) {
      await writer.heartbeat(room, user, "c");
      await writer.startTyping(room, user);
    }
    const events = await listenTo(writer, rooms);
    const sweepers = [1, 2].map(
      () => new Sweeper(new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS }), { intervalMs: 50 }),
    );
    sweepers.forEach((s) => s.start());
    await eventually(() => events.length >= typists.length);
    await Promise.all(sweepers.map((s) => s.stop()));
    await caughtUp(events);
    expect(events.map(keyOf).sort()).to.deep.equal(
      typists.map(({ room, user }) => `typing-stop|${room}|${user}`).sort(),
    );
    expect(events.every((e) => e.type === "typing-stop" && e.reason === "expired")).to.equal(true);
  });

  it("loses nothing when a sweeper dies mid-pass, or all of them are down for a while", async () => {
    const writer = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
    const rooms = roomsOf(50);
    const cohort = (name: string) =>
      rooms.flatMap((room) =>
        Array.from({ length: 20 }, (_, i) => ({ room, user: `${name}${i}` })),
      );
    const first = cohort("first");
    const second = cohort("second");
    const events = await listenTo(writer, rooms);
    await Promise.all(first.map(({ room, user }) => writer.heartbeat(room, user, "c")));
    await advanceClock(writer.redis, writer, OPTIONS.presenceWindowMs + 100);

    // Dies mid-pass: a proxy lets its first sweep calls through (each expires 5 members at
    // most), swallows their replies and cuts its connection, whatever the machine's speed.
    const { hostname, port } = new URL(redisUrl());
    const proxy = await startProxy({ host: hostname, port: Number(port) });
    const doomedClient = new Redis(proxy.url, {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    doomedClient.on("error", () => undefined);
    const doomed = new Sweeper(new Rollcall(doomedClient, { ...IMMEDIATE, ...OPTIONS }), {
      intervalMs: 10,
      batch: 5,
    });
    doomed.on("failed", () => undefined);
    try {
      const cut = proxy.dropNextReply(isEvalOf(":due"));
      doomed.start();
      await cut;
      await doomed.stop();
    } finally {
      doomedClient.disconnect();
      await proxy.close();
    }
    await caughtUp(events);
    const announced = events.filter((e) => e.type === "leave").length;
    expect(announced).to.be.within(1, first.length - 1);

    // Nobody sweeps while the second cohort expires; a new sweeper finds both.
    await Promise.all(second.map(({ room, user }) => writer.heartbeat(room, user, "c")));
    await advanceClock(writer.redis, writer, OPTIONS.presenceWindowMs + 100);
    const heir = new Sweeper(new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS }), {
      intervalMs: 50,
    });
    heir.start();
    await eventually(() => events.length >= first.length * 2 + second.length * 2, 10_000);
    await heir.stop();
    await caughtUp(events);
    const leaves = events.filter((e) => e.type === "leave").map(keyOf);
    expect(leaves.sort()).to.deep.equal(
      [...first, ...second].map(({ room, user }) => `leave|${room}|${user}`).sort(),
    );
  });

  it("keeps sweeping when its own listeners throw", async () => {
    const unhandled = watchUnhandled();
    const sweeper = new Sweeper(new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS }), {
      intervalMs: 10,
    });
    let passes = 0;
    sweeper.on("pass", () => (passes += 1));
    sweeper.on("pass", () => {
      throw new Error("a listener's bug");
    });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      sweeper.start();
      await eventually(() => passes >= 3);
      await sweeper.stop();
      expect(warnings.some((w) => w.message === "a listener's bug")).to.equal(true);
      expect(unhandled.count()).to.equal(0);
    } finally {
      process.off("warning", onWarning);
      unhandled.stop();
    }
  });

  it("backs off while Redis is down, reports typed errors, and resumes", async () => {
    const own = await ownRedis();
    const redis = new Redis(own.url, { maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    redis.on("error", () => undefined);
    const unhandled = watchUnhandled();
    const sweeper = new Sweeper(new Rollcall(redis, { ...IMMEDIATE, ...OPTIONS }), {
      intervalMs: 20,
      maxBackoffMs: 200,
    });
    const failures: { error: Error; retryInMs: number }[] = [];
    let passes = 0;
    sweeper.on("failed", (error, retryInMs) => failures.push({ error, retryInMs }));
    sweeper.on("pass", () => (passes += 1));
    try {
      sweeper.start();
      await eventually(() => passes > 0);
      await own.server.stop();
      await eventually(() => failures.length >= 4, 10_000);
      expect(failures.every((f) => f.error instanceof RedisCallError)).to.equal(true);
      expect(failures.map((f) => (f.error as RedisCallError).code)).to.include("REDIS_UNAVAILABLE");
      expect(failures.map((f) => (f.error as RedisCallError).code)).to.not.include("SCRIPT_ERROR");
      expect(failures.map((f) => f.retryInMs).slice(0, 4)).to.deep.equal([40, 80, 160, 200]);
      await own.server.start();
      const before = passes;
      await eventually(() => passes > before, 10_000);
      expect(unhandled.count()).to.equal(0);
    } finally {
      await sweeper.stop();
      unhandled.stop();
      redis.disconnect();
    }
  });

  it("reports a script failing on what it reads as SCRIPT_ERROR, loudly, and sweeps every other room", async () => {
    // One bucket: the broken room, due first, is listed ahead of a hundred others every time.
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, buckets: 1 });
    await rc.heartbeat("broken", "bob", "c");
    const sane = Array.from({ length: 100 }, (_, i) => `sane${i}`);
    await Promise.all(sane.map((room) => rc.heartbeat(room, "ann", "c")));
    // A record no script wrote: decoding it fails inside the sweep's script.
    await rc.redis.hset(rc.layout.room("broken").keys[0], "bob", "xx");
    await advanceClock(rc.redis, rc, OPTIONS.presenceWindowMs + 100);

    // One pass tries every due room, then reports the failure.
    const sweeper = new Sweeper(rc, { intervalMs: 20, maxBackoffMs: 40 });
    const error = await sweeper.sweepOnce().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RedisCallError).with.property("code", "SCRIPT_ERROR");
    const left = await Promise.all(sane.map(async (room) => (await rc.roster(room)).count));
    expect(left.filter((count) => count > 0)).to.have.length(0);

    // Running, it says so with a warning, even with no 'failed' listener, and keeps going.
    const warnings: Error[] = [];
    const warn = (w: Error) => warnings.push(w);
    process.on("warning", warn);
    try {
      sweeper.start();
      await eventually(() => warnings.length >= 2);
      expect(warnings.every((w) => (w as RedisCallError).code === "SCRIPT_ERROR")).to.equal(true);
    } finally {
      await sweeper.stop();
      process.off("warning", warn);
    }
  });
});
