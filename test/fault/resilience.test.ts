import { expect } from "chai";
import { Redis } from "ioredis";
import { RedisCallError, Rollcall } from "../../src/index.js";
import { IMMEDIATE, caughtUp, client, listen, ownRedis } from "../kit/redis.js";
import { passTime } from "../kit/clock.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

describe("resilience", () => {
  describe("the safety-net expiry", () => {
    const SHORT = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000 };

    it("sets it on every key a join creates", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...SHORT });
      await rc.heartbeat("room", "ann", "c");
      const [room, , due] = rc.layout.room("room").keys;
      for (const key of [room, due]) {
        expect(await rc.redis.pttl(key), key).to.be.within(1, 3_000);
      }
    });

    // Time passes on the test clock and the key TTLs together (passTime), not by waiting.
    it("keeps keys alive while heartbeats go on, with a few PEXPIREs per TTL", async () => {
      const redis = client();
      const rc = new Rollcall(redis, { ...IMMEDIATE, ...SHORT });
      const events = await listen([rc.channel("room")]);
      for (let elapsed = 0; elapsed < 4_000; elapsed += 100) {
        await rc.heartbeat("room", "ann", "c");
        await passTime(redis, rc, 100);
      }
      expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["ann"]);
      await caughtUp(events);
      expect(
        events.map((e) => e.type),
        "the keys never vanished",
      ).to.deep.equal(["join"]);
      const pexpires = /cmdstat_pexpire:calls=(\d+)/.exec(await redis.info("commandstats"));
      // One refresh of three keys at the join, then one per quarter TTL crossed (about 5 in 4 s).
      expect(Number(pexpires?.[1])).to.be.within(3, 3 * 8);
    });

    it("restarts a room's chain when its members vanished with it unannounced", async () => {
      const redis = client();
      const rc = new Rollcall(redis, { ...IMMEDIATE, ...SHORT });
      const events = await listen([rc.channel("room")]);
      await rc.heartbeat("room", "ann", "c");
      await passTime(redis, rc, 3_200); // no sweeper, no write: the keys expire
      const [room, index, due] = rc.layout.room("room").keys;
      expect(await redis.exists(room, index, due)).to.equal(0);
      await rc.heartbeat("room", "bob", "c");
      await eventually(() => events.length === 2);
      expect(events[1]).to.deep.include({ type: "join", user: "bob", prev: 0, count: 1 });
      expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["bob"]);
    });
  });

  it("carries on after SCRIPT FLUSH", async () => {
    const redis = client();
    const rc = new Rollcall(redis, IMMEDIATE);
    expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(true);
    expect((await rc.roster("room")).count).to.equal(1);
    await redis.script("FLUSH");
    expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(false);
    // The roster's script runs inside a MULTI, where the client cannot resend it by itself.
    expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["ann"]);
    await redis.script("FLUSH");
    expect((await rc.roster("room")).members.map((m) => m.user)).to.deep.equal(["ann"]);
    expect((await rc.leave("room", "ann", "c")).left).to.equal(true);
  });

  it("fails calls with a typed error while Redis is down and resumes after it restarts", async () => {
    const own = await ownRedis();
    const redis = new Redis(own.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    const connectionErrors: Error[] = [];
    redis.on("error", (e: Error) => connectionErrors.push(e));
    const unhandled = watchUnhandled();
    try {
      const rc = new Rollcall(redis, IMMEDIATE);
      expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(true);

      await own.server.stop();
      const failures: unknown[] = [];
      for (let i = 0; i < 5; i++) {
        await rc.heartbeat("room", "ann", "c").catch((e: unknown) => failures.push(e));
        await rc.roster("room").catch((e: unknown) => failures.push(e));
      }
      expect(failures).to.have.length(10);
      for (const failure of failures) {
        expect(failure).to.be.instanceOf(RedisCallError).with.property("code", "REDIS_UNAVAILABLE");
      }

      await own.server.start();
      let resumed: boolean | undefined;
      const answered = async () => {
        resumed = (await rc.heartbeat("room", "ann", "c")).joined;
        return true;
      };
      await eventually(answered, 10_000, "a heartbeat answered after the restart");
      // The restarted server kept nothing, so ann joins again.
      expect(resumed).to.equal(true);
      expect(connectionErrors.length).to.be.greaterThan(0);
      expect(unhandled.count()).to.equal(0);
    } finally {
      unhandled.stop();
      redis.disconnect();
    }
  });
});
