import { expect } from "chai";
import { Redis } from "ioredis";
import { Rollcall, Sweeper, type PresenceEvent } from "../../src/index.js";
import { RedisProcess } from "../chaos/server.js";
import { startProxy, type Proxy } from "../kit/proxy.js";
import { parseEvent } from "../../src/protocol/events.js";
import { advanceClock } from "../kit/clock.js";
import { IMMEDIATE, caughtUp, client, listen, redisNow, redisUrl } from "../kit/redis.js";
import { eventually, sleep } from "../kit/wait.js";

// A stall of Redis longer than the presence window (a CLIENT PAUSE, a SIGSTOP, a restart loading
// its AOF): no holder that kept heartbeating is announced gone; a connection that really died
// leaves once, within a window (and the grace) after Redis is back.
describe("Redis stalled longer than the presence window", function () {
  this.timeout(60_000);
  const WINDOW = 3_000;
  const OPTIONS = { ...IMMEDIATE, presenceWindowMs: WINDOW, typingWindowMs: 500 };
  const stops: (() => unknown)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
  });

  /** Heartbeats `user` every third of a window until the test ends, whatever each call does. */
  function holder(rc: Rollcall, user: string): void {
    const beat = () => rc.heartbeat("room", user, "c").catch(() => undefined);
    void beat();
    const timer = setInterval(() => void beat(), WINDOW / 3);
    stops.push(() => clearInterval(timer));
  }

  function sweeping(rc: Rollcall): void {
    const sweeper = new Sweeper(rc, { intervalMs: 100, maxBackoffMs: 200 });
    sweeper.on("failed", () => undefined);
    sweeper.start();
    stops.push(() => sweeper.stop());
  }

  /** How many leaves of `user` were seen. */
  function leavesOf(events: readonly { event: PresenceEvent }[], user: string): number {
    return events.filter(({ event }) => event.type === "leave" && event.user === user).length;
  }

  /**
   * Joins ann (who keeps beating) and bob (who beats once, then dies), with a sweeper; the
   * events of the room as they come, on a connection of `subscriber` (the test's Redis if none).
   */
  async function scene(rc: Rollcall, subscriber?: Redis) {
    const seen: { event: PresenceEvent; at: number }[] = [];
    const seeing = ({ event }: { event: PresenceEvent }) => seen.push({ event, at: Date.now() });
    if (subscriber) {
      subscriber.on("smessage", (_: string, message: string) =>
        seeing({ event: parseEvent(message) }),
      );
      await subscriber.ssubscribe(rc.channel("room"));
    } else {
      const events = await listen([rc.channel("room")]);
      const collect = setInterval(() => {
        for (const event of events.splice(0)) seeing({ event });
      }, 10);
      stops.push(() => clearInterval(collect));
    }
    holder(rc, "ann");
    await rc.heartbeat("room", "bob", "c");
    sweeping(rc);
    // A window of steady beats and sweeps before the stall.
    await sleep(WINDOW / 2);
    return seen;
  }

  /** After Redis is back at `back`: bob leaves once, in time; ann never. */
  async function settled(seen: { event: PresenceEvent; at: number }[], back: number) {
    await eventually(() => leavesOf(seen, "bob") === 1, 3 * WINDOW, "bob's leave");
    const bobLeft = seen.find(({ event }) => event.type === "leave")!.at;
    // A window and a sweep after Redis is back (twice that, for a busy machine's sake).
    expect(bobLeft - back, "bob left in time").to.be.below(2 * WINDOW);
    // Another window: ann, who kept beating, is still never announced gone.
    await sleep(WINDOW);
    expect(leavesOf(seen, "ann"), "leaves of a live holder").to.equal(0);
    expect(leavesOf(seen, "bob"), "bob leaves once").to.equal(1);
  }

  it("holds heartbeating members through a CLIENT PAUSE of 4 s at a 3 s window", async () => {
    const rc = new Rollcall(client(), OPTIONS);
    const seen = await scene(rc);
    const admin = client();
    await admin.client("PAUSE", 4_000, "ALL");
    await sleep(4_000);
    await settled(seen, Date.now());
  });

  describe("on a redis-server of its own", () => {
    let server: RedisProcess;
    const own = (): Redis => {
      // Reconnecting at once: back means back for these clients too.
      const redis = new Redis(server.url, { maxRetriesPerRequest: null, retryStrategy: () => 100 });
      redis.on("error", () => undefined);
      stops.push(() => redis.disconnect());
      return redis;
    };
    // The test's holders and sweeper stop first, while the server still answers: a sweeper
    // stopped after it waits for a pass whose calls retry for ever (maxRetriesPerRequest null).
    afterEach(async () => {
      for (const stop of stops.splice(0)) await stop();
      await server.stop();
    });

    it("holds them through a SIGSTOP of 4 s", async () => {
      server = await RedisProcess.start(false);
      const rc = new Rollcall(own(), OPTIONS);
      const seen = await scene(rc, own());
      server.signal("SIGSTOP");
      await sleep(4_000);
      server.signal("SIGCONT");
      await settled(seen, Date.now());
    });

    it("holds them through a restart that loads the AOF, 4 s down", async () => {
      server = await RedisProcess.start(true);
      const rc = new Rollcall(own(), OPTIONS);
      const seen = await scene(rc, own());
      await server.kill();
      await sleep(4_000);
      await server.launch();
      await settled(seen, Date.now());
    });
  });

  describe("stalls as the scripts see them", () => {
    // A stall of `ms` as the scripts see it, without waiting: no sweep noted for `ms` of Redis's
    // own clock, and `ms` of deadlines passed on the test clock.
    async function stall(rc: Rollcall, ms: number) {
      const redis = client();
      await redis.hset(rc.layout.bucketKeys(0)[1], "sw", (await redisNow(redis)) - ms);
      await advanceClock(redis, rc, ms);
    }
    const one = { ...OPTIONS, buckets: 1 };
    const said = (events: PresenceEvent[]) => events.map((e) => `${e.type} ${e.user}`);

    it("holds through a second stall what the first one held", async () => {
      const rc = new Rollcall(client(), one);
      const events = await listen([rc.channel("room")]);
      await rc.heartbeat("room", "ann", "c");
      await rc.sweepBucket(0);
      await stall(rc, 4_000);
      await rc.sweepBucket(0); // ann held until a window after the stall
      await stall(rc, 1_500); // a second stall within that hold
      expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(false);
      await stall(rc, 2_900);
      await rc.sweepBucket(0);
      await caughtUp(events);
      expect(said(events)).to.deep.equal(["join ann"]);
    });

    it("holds a leave grace that ends in a stall: a reload across it publishes nothing", async () => {
      for (const sweepFirst of [true, false]) {
        const rc = new Rollcall(client(), {
          ...one,
          leaveGraceMs: 5_000,
          prefix: `g${sweepFirst}`,
        });
        const events = await listen([rc.channel("room")]);
        await rc.heartbeat("room", "ann", "c1");
        await rc.sweepBucket(0);
        await rc.leave("room", "ann", "c1"); // the page reloads: its grace starts
        await stall(rc, 6_000); // the new page's beats fail throughout
        if (sweepFirst) await rc.sweepBucket(0);
        await rc.heartbeat("room", "ann", "c2");
        await caughtUp(events);
        expect(said(events), `sweep first: ${sweepFirst}`).to.deep.equal(["join ann"]);
      }
    });

    it("takes no gap of under three Sweeper intervals for a stall", async () => {
      const rc = new Rollcall(client(), one);
      const events = await listen([rc.channel("room")]);
      await rc.heartbeat("room", "bob", "c");
      await rc.sweepBucket(0, { everyMs: 1_000 });
      // A Sweeper pausing 1 s between passes, 1.5 s since its last sweep, in which bob's
      // deadline passed: its cadence, no stall.
      await advanceClock(client(), rc, WINDOW - 500);
      await stall(rc, 1_500);
      expect((await rc.sweepBucket(0, { everyMs: 1_000 })).leaves).to.equal(1);
      await caughtUp(events);
      expect(said(events)).to.deep.equal(["join bob", "leave bob"]);
    });

    it("holds nothing once no sweep ran for ten windows: sweepers gone for good", async () => {
      const redis = client();
      const rc = new Rollcall(redis, one);
      const events = await listen([rc.channel("room")]);
      await rc.heartbeat("room", "ann", "c1");
      await rc.heartbeat("room", "ann", "c2");
      await rc.sweepBucket(0);
      // c1 dies; c2 goes on beating; the last sweep ran eleven windows ago.
      await advanceClock(redis, rc, WINDOW / 2);
      await rc.heartbeat("room", "ann", "c2");
      await advanceClock(redis, rc, WINDOW / 2 + 100);
      await redis.hset(rc.layout.bucketKeys(0)[1], "sw", (await redisNow(redis)) - 11 * WINDOW);
      await rc.heartbeat("room", "ann", "c2");
      const [member] = (await rc.roster("room")).members;
      expect(member?.connections, "c1 is gone").to.equal(1);
      await caughtUp(events);
      expect(said(events)).to.deep.equal(["join ann"]);
    });
  });

  it("still expires on time the members of a gateway cut off alone", async () => {
    const { hostname, port } = new URL(redisUrl());
    const proxy: Proxy = await startProxy({ host: hostname, port: Number(port) });
    stops.push(() => proxy.close());
    const cutOff = new Redis(proxy.url, { maxRetriesPerRequest: null });
    cutOff.on("error", () => undefined);
    stops.push(() => cutOff.disconnect());
    const rc = new Rollcall(client(), OPTIONS);
    const isolated = new Rollcall(cutOff, OPTIONS);
    const seen = await scene(rc);
    holder(isolated, "carl");
    await eventually(async () => (await rc.roster("room")).count === 3, WINDOW, "carl's join");
    proxy.pause();
    const cut = Date.now();
    // Its member goes a window after its last beat, while it is still cut off; ann stays.
    await eventually(() => leavesOf(seen, "carl") === 1, 3 * WINDOW, "carl's leave");
    expect(Date.now() - cut).to.be.below(2 * WINDOW);
    expect(leavesOf(seen, "ann")).to.equal(0);
    proxy.resume();
  });
});
