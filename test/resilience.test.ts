import { expect } from "chai";
import { Redis } from "ioredis";
import { RedisCallError } from "../src/errors.js";
import { Rollcall } from "../src/rollcall.js";
import { client, ownRedis, sleep, watchUnhandled } from "./support.js";

describe("resilience", () => {
  it("carries on after SCRIPT FLUSH", async () => {
    const redis = client();
    const rc = new Rollcall(redis);
    expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(true);
    await redis.script("FLUSH");
    expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(false);
    expect((await rc.leave("room", "ann", "c")).left).to.equal(true);
  });

  it("fails calls with a typed error while Redis is down and resumes after it restarts", async () => {
    const own = await ownRedis();
    const redis = new Redis(own.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    const connectionErrors: Error[] = [];
    redis.on("error", (e: Error) => connectionErrors.push(e));
    const unhandled = watchUnhandled();
    try {
      const rc = new Rollcall(redis);
      expect((await rc.heartbeat("room", "ann", "c")).joined).to.equal(true);

      await own.server.stop();
      const failures: unknown[] = [];
      for (let i = 0; i < 5; i++) {
        await rc.heartbeat("room", "ann", "c").catch((e: unknown) => failures.push(e));
        await rc.roster("room").catch((e: unknown) => failures.push(e));
      }
      expect(failures).to.have.length(10);
      for (const failure of failures) {
        expect(failure).to.be.instanceOf(RedisCallError).with.property("code", "REDIS_ERROR");
      }

      await own.server.start();
      let resumed: boolean | undefined;
      const until = Date.now() + 10_000;
      while (resumed === undefined && Date.now() < until) {
        resumed = await rc
          .heartbeat("room", "ann", "c")
          .then((r) => r.joined)
          .catch(() => undefined);
        await sleep(50);
      }
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
