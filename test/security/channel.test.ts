// Messages on a room's channel that rollcall did not publish (anyone who can publish to the Redis
// can): a gateway process and its browser clients, and a RoomWatch, must never stay silent, loop
// on snapshots, or report a divergence as synced. These tests hold whether or not the channel's
// messages are authenticated (then forged ones are dropped before anything sees them): they bound
// the snapshots a forged message costs, and check that every replica ends equal to roster().
import { expect } from "chai";
import type { Redis } from "ioredis";
import { RollcallClient, type Room } from "../../src/client/index.js";
import { Rollcall, Subscriber, type RoomWatch, type RosterChange } from "../../src/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { connect } from "../kit/gateway.js";
import { client } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";
import { startProcess, stopProcesses, until } from "./harness.js";

/** Long windows: no heartbeat runs during a test, so every script Redis runs is a roster(). */
const ENGINE = { leaveGraceMs: 0, presenceWindowMs: 600_000, keyTtlMs: 1_800_000 };
const ROOM = "doc";

/** A forged event of the room: schema-valid, as a publish-only attacker would write it. */
function forged(fields: Partial<PresenceEvent> & { seq: number; prev: number; epoch: string }) {
  return JSON.stringify({
    v: 2,
    type: "join",
    room: ROOM,
    user: "forger",
    at: Date.now(),
    state: null,
    roster: ["forger"],
    count: 1,
    ...fields,
  });
}

async function scripts(admin: Redis): Promise<number> {
  const stats = String(await admin.info("commandstats"));
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

/** The room as roster() has it, in the replica's shape. */
async function truth(rollcall: Rollcall) {
  const r = await rollcall.roster(ROOM);
  const members = r.members.map(({ user, joinedAt, state }) => ({ user, joinedAt, state }));
  return { room: ROOM, epoch: r.epoch, seq: r.seq, count: r.count, members, typing: r.typing };
}

describe("security: messages on a room's channel that rollcall did not publish", function () {
  this.timeout(60_000);
  let rollcall: Rollcall;
  let admin: Redis;
  let channel: string;

  beforeEach(() => {
    rollcall = new Rollcall(client(), ENGINE);
    admin = client();
    channel = rollcall.channel(ROOM);
  });

  describe("through a gateway process to its browser clients", () => {
    let room: Room;
    let ann: RollcallClient;
    const changes: RosterChange[] = [];

    beforeEach(async () => {
      const gateway = await startProcess({ engine: ENGINE });
      ann = connect(gateway.url, "ann");
      room = await ann.join(ROOM);
      changes.length = 0;
      room.on("change", (change: RosterChange) => changes.push(change));
    });
    afterEach(async () => {
      ann.close();
      await stopProcesses([]);
    });

    const converged = async () => {
      await until(
        async () => JSON.stringify(room.roster) === JSON.stringify(await truth(rollcall)),
      );
      expect(room.synced).to.equal(true);
    };

    it("costs a few snapshots at most under a flood of future events, and no client sees one", async () => {
      const { epoch, seq } = await rollcall.roster(ROOM);
      const before = await scripts(admin);
      const flood = 2_000;
      for (let i = 0; i < flood; i++) {
        await admin.spublish(channel, forged({ epoch, seq: seq + 1_000 + i, prev: seq + 999 + i }));
      }
      // Garbage, another room's event, another schema: dropped by the subscriber.
      await admin.spublish(channel, "{not json");
      await admin.spublish(channel, forged({ epoch, seq: seq + 1, prev: seq, room: "other" }));
      await admin.spublish(channel, JSON.stringify({ v: 3, type: "join" }));
      await rollcall.heartbeat(ROOM, "bob", "c1"); // a real event after the flood
      await eventually(() => room.roster.members.some((m) => m.user === "bob"));
      const snapshots = (await scripts(admin)) - before - 1; // and bob's heartbeat
      await converged();
      // One resync per forged message at the very most; spaced out, a handful in all.
      expect(snapshots).to.be.at.most(flood).and.at.most(20);
      expect(changes.map((c) => `${c.type}:${c.user}`)).to.deep.equal(["join:bob"]);
    });

    it("is never silenced by a forged event with a huge number", async () => {
      const { epoch, seq } = await rollcall.roster(ROOM);
      await admin.spublish(
        channel,
        forged({ epoch, seq: 1e15, prev: seq, type: "typing-start", user: "ann" }),
      );
      await rollcall.heartbeat(ROOM, "bob", "c1");
      await eventually(() => room.roster.members.some((m) => m.user === "bob"));
      await converged();
      await rollcall.leave(ROOM, "bob", "c1");
      await eventually(() => room.roster.count === 1);
      await converged();
    });

    it("undoes a phantom join that took the next event's number, at that event", async () => {
      const { epoch, seq } = await rollcall.roster(ROOM);
      await admin.spublish(channel, forged({ epoch, seq: seq + 1, prev: seq, user: "phantom" }));
      await rollcall.heartbeat(ROOM, "bob", "c1"); // takes seq + 1 for real
      await eventually(() => room.roster.members.some((m) => m.user === "bob"));
      await converged();
      expect(room.roster.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
    });
  });

  describe("to a RoomWatch", () => {
    let subscriber: Subscriber;
    let watch: RoomWatch;
    let snapshots = 0;
    const refused: Error[] = [];

    beforeEach(async () => {
      // Counts the watch's snapshots: every roster() call of its engine.
      const counted = new Rollcall(client(), ENGINE);
      const roster = counted.roster.bind(counted);
      counted.roster = (room: string) => {
        snapshots += 1;
        return roster(room);
      };
      subscriber = new Subscriber(counted);
      refused.length = 0;
      subscriber.on("error", (error) => refused.push(error)); // the foreign messages, reported
      await rollcall.heartbeat(ROOM, "ann", "c0");
      watch = await subscriber.watch(ROOM);
      snapshots = 0;
    });
    afterEach(async () => {
      await watch.close();
      subscriber.close();
    });

    const converged = async () => {
      await until(
        async () => JSON.stringify(watch.roster) === JSON.stringify(await truth(rollcall)),
      );
      expect(watch.synced).to.equal(true);
    };

    it("never applies what the deployment did not sign, not even a real message altered", async () => {
      const { epoch, seq } = await rollcall.roster(ROOM);
      // A phantom join that would fit the chain exactly.
      await admin.spublish(channel, forged({ epoch, seq: seq + 1, prev: seq, user: "phantom" }));
      // A real message, captured, with its content altered and its signature kept.
      const spy = client();
      const captured: string[] = [];
      spy.on("smessage", (_c: string, message: string) => captured.push(message));
      await spy.ssubscribe(channel);
      await rollcall.heartbeat(ROOM, "bob", "c1");
      await eventually(() => captured.length === 1);
      await admin.spublish(channel, captured[0]!.replace('"bob"', '"eve"'));
      await eventually(() => refused.length === 2);
      expect(refused.every((e) => /not signed/.test(e.message))).to.equal(true);
      await converged();
      expect(watch.roster.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
      // Nothing forged ever reached the replica: no resync was needed.
      expect(snapshots).to.equal(0);
    });

    it("resyncs with backoff under a flood of future events, never in a loop", async () => {
      const { epoch, seq } = await rollcall.roster(ROOM);
      const flood = 2_000;
      for (let i = 0; i < flood; i++) {
        await admin.spublish(channel, forged({ epoch, seq: seq + 1_000 + i, prev: seq + 999 + i }));
      }
      await rollcall.heartbeat(ROOM, "bob", "c1");
      await eventually(() => watch.roster.members.some((m) => m.user === "bob"), 10_000);
      await converged();
      expect(snapshots).to.be.at.most(flood).and.at.most(20);
    });

    it("resyncs on a conflict, and comes back below a huge forged number", async () => {
      const { epoch, seq } = await rollcall.roster(ROOM);
      await admin.spublish(channel, forged({ epoch, seq: seq + 1, prev: seq, user: "phantom" }));
      await rollcall.heartbeat(ROOM, "bob", "c1");
      await eventually(() => watch.roster.members.some((m) => m.user === "bob"));
      await converged();
      const now = await rollcall.roster(ROOM);
      await admin.spublish(
        channel,
        forged({ epoch, seq: 1e15, prev: now.seq, user: "ann", type: "update" }),
      );
      await rollcall.leave(ROOM, "bob", "c1");
      await eventually(() => watch.roster.count === 1);
      await converged();
      expect(snapshots).to.be.at.most(2);
    });
  });
});
