import { expect } from "chai";
import { storm } from "../kit/storm.js";
import { client, redisUrl } from "../kit/redis.js";
import { watchUnhandled } from "../kit/wait.js";

/**
 * A reconnect storm at CI's scale (the bench runs it with thousands of sockets): two gateway
 * processes with 300 sockets each (their clients in two processes of their own), rooms of 150
 * split between them; one is SIGKILLed and its clients come back through the other with their
 * backoff's jitter. With the default leave grace
 * nobody leaves or joins again, sockets back in the same room share snapshot reads, and every
 * replica ends up the room's roster.
 */
describe("a reconnect storm", function () {
  this.timeout(90_000);

  it("brings a killed gateway's clients back through the other: no leave, no join, shared reads, every roster whole", async () => {
    const unhandled = watchUnhandled();
    try {
      const result = await storm({
        redisUrl: redisUrl(),
        redis: client(),
        socketsPerGateway: 300,
        roomSize: 150,
        // Two client processes, as the bench's storm has several.
        socketsPerProcess: 300,
        // The default leave grace (5 s), and a short window so that the dead connections expire
        // within the run: their users stay, being back on new ones.
        engine: { prefix: "storm", presenceWindowMs: 3_000, typingWindowMs: 1_000 },
        timeoutMs: 20_000,
      });
      console.log(`      ${JSON.stringify(result)}`);
      expect(result.reconnected).to.equal(300);
      expect({ leaves: result.leaves, joins: result.joins }).to.deep.equal({ leaves: 0, joins: 0 });
      // 300 rejoins into 4 rooms: the sockets that come back together share a read.
      expect(result.snapshotReads).to.be.within(1, 100);
      expect({
        clientErrors: result.clientErrors,
        gatewayErrors: result.gatewayErrors,
        unhandled: result.unhandled,
        first: result.firstError,
      }).to.deep.equal({ clientErrors: 0, gatewayErrors: 0, unhandled: 0, first: null });
      expect(unhandled.count()).to.equal(0);
    } finally {
      unhandled.stop();
    }
  });
});
