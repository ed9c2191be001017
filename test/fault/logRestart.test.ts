import { expect } from "chai";
import { Redis } from "ioredis";
import {
  LogConsumer,
  Rollcall,
  type HeartbeatResult,
  type PresenceEvent,
} from "../../src/index.js";
import { IMMEDIATE, ownRedis } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

/**
 * A restart without persistence empties Redis: the buckets' streams, and the consumer groups in
 * them, are gone. The events published after it start a new epoch in new streams, and a
 * LogConsumer must go on handling them.
 */
describe("the log consumer after a restart that lost the data", () => {
  it("handles the events published after it", async function () {
    this.timeout(20_000);
    const own = await ownRedis();
    const redis = new Redis(own.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    redis.on("error", () => undefined);
    const rc = new Rollcall(redis, { ...IMMEDIATE, logLength: 1_000, buckets: 2 });
    const seen: PresenceEvent[] = [];
    const errors: string[] = [];
    const consumer = new LogConsumer(rc, (e) => void seen.push(e), { group: "audit", pollMs: 20 });
    consumer.on("error", (e) => errors.push(e.message));
    consumer.start();
    try {
      const before = await rc.heartbeat("room", "ann", "c");
      await eventually(() => seen.length === 1);

      await own.server.stop();
      await own.server.start();
      let after: HeartbeatResult | undefined;
      const answered = async () => {
        after = await rc.heartbeat("room", "bob", "c");
        return true;
      };
      await eventually(answered, 10_000, "a heartbeat answered after the restart");
      expect(after?.event?.epoch, "a new epoch after the loss").to.not.equal(before.event?.epoch);

      const handled = () => {
        const last = errors.at(-1) ?? "none";
        expect(
          seen.map((e) => e.user),
          `bob's join never handled; ${errors.length} errors, the last: ${last}`,
        ).to.deep.equal(["ann", "bob"]);
        return true;
      };
      await eventually(handled, 10_000, "bob's join to be handled");
      await consumer.stop(); // what it was handling is in: nothing more, no duplicate
      handled();
    } finally {
      await consumer.stop();
      redis.disconnect();
    }
  });
});
