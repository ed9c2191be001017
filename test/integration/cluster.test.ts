import { expect } from "chai";
import { parseEvent, type PresenceEvent } from "../../src/protocol/events.js";
import { Rollcall, Sweeper } from "../../src/index.js";
import { useCluster } from "../kit/cluster.js";
import { IMMEDIATE } from "../kit/redis.js";
import { advanceClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";

const OPTIONS = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000 };
const FENCE = "fence";

describe("on Redis Cluster", () => {
  const { connect } = useCluster(3);

  it("runs every operation unchanged across shards, events over sharded pub/sub", async () => {
    const redis = connect();
    const rc = new Rollcall(redis, { ...IMMEDIATE, ...OPTIONS });
    const rooms = Array.from({ length: 32 }, (_, i) => `room${i}`);
    const shards = new Set<string>();
    for (const room of rooms) {
      const slot = await redis.cluster("KEYSLOT", rc.layout.room(room).keys[0]);
      const owner = redis.slots[Number(slot)]![0]!;
      shards.add(owner);
    }
    expect(shards.size, "rooms spread over every shard").to.equal(3);

    const subscriber = connect({ shardedSubscribers: true });
    const events: PresenceEvent[] = [];
    let fences = 0;
    subscriber.on("smessage", (_channel: string, message: string) =>
      message === FENCE ? fences++ : events.push(parseEvent(message)),
    );
    for (const room of rooms) await subscriber.ssubscribe(rc.channel(room));

    for (const room of rooms) {
      expect((await rc.heartbeat(room, "ann", "c1", { state: { s: 1 } })).joined).to.equal(true);
      await rc.heartbeat(room, "bob", "c1");
      await rc.startTyping(room, "ann");
      await rc.setState(room, "ann", { s: 2 });
      expect((await rc.leave(room, "bob", "c1")).left).to.equal(true);
      const roster = await rc.roster(room);
      expect(roster.members.map((m) => [m.user, m.state])).to.deep.equal([["ann", { s: 2 }]]);
      expect(roster.typing).to.deep.equal(["ann"]);
    }
    await advanceClock(redis, rc, 1_100);
    const pass = await new Sweeper(rc).sweepOnce();
    expect(pass).to.deep.include({ leaves: rooms.length, typingStops: rooms.length });

    const perRoom = 7; // join, join, typing-start, update, leave, typing-stop, leave
    // A fence after each room's events: a channel's messages arrive in the order published.
    for (const room of rooms) await redis.spublish(rc.channel(room), FENCE);
    await eventually(() => fences === rooms.length, 10_000);
    expect(events).to.have.length(rooms.length * perRoom);
    for (const room of rooms) {
      expect(events.filter((e) => e.room === room).map((e) => `${e.type}:${e.user}`)).to.deep.equal(
        [
          "join:ann",
          "join:bob",
          "typing-start:ann",
          "update:ann",
          "leave:bob",
          "typing-stop:ann",
          "leave:ann",
        ],
      );
    }
  });
});
