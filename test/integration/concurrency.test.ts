import { expect } from "chai";
import type { Redis } from "ioredis";
import { NaiveTracker } from "../kit/naive.js";
import { Rollcall } from "../../src/index.js";
import { caughtUp, IMMEDIATE, client, listen, redisNow } from "../kit/redis.js";
import { advanceClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";

/** Separate connections standing for separate server instances, all connected. */
async function instances(n: number, options = {}): Promise<Rollcall[]> {
  const all = Array.from({ length: n }, () => new Rollcall(client(), { ...IMMEDIATE, ...options }));
  await Promise.all(all.map((rc) => (rc.redis as Redis).ping()));
  return all;
}

describe("concurrency", () => {
  it("publishes exactly one join when 8 instances see a user's first heartbeat at once", async () => {
    const fleet = await instances(8);
    const events = await listen([fleet[0]!.channel("room")]);
    const trials = 100;
    for (let t = 0; t < trials; t++) {
      const results = await Promise.all(
        fleet.map((rc, i) => rc.heartbeat("room", `user${t}`, `conn${i}`)),
      );
      expect(results.filter((r) => r.joined)).to.have.length(1);
    }
    await caughtUp(events);
    expect(events.map((e) => `${e.type}:${e.user}`)).to.have.members(
      Array.from({ length: trials }, (_, t) => `join:user${t}`),
    );
    expect((await fleet[0]!.roster("room")).members.every((m) => m.connections === 8)).to.equal(
      true,
    );
  });

  it("publishes exactly 1,000 leaves when 4 instances sweep a room of 1,000 expired users", async () => {
    const options = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000 };
    const [writer] = await instances(1, { ...options, eventRosterLimit: 0 });
    const users = Array.from({ length: 1_000 }, (_, i) => `user${i}`);
    await Promise.all(users.map((u) => writer!.heartbeat("room", u, "c")));
    const events = await listen([writer!.channel("room")]);
    await advanceClock(writer!.redis, writer!, 1_100);

    const sweepers = await instances(4, options);
    const counts = await Promise.all(sweepers.map((rc) => rc.sweepRoom("room")));
    expect(counts.reduce((sum, c) => sum + c.leaves, 0)).to.equal(1_000);

    await caughtUp(events);
    expect(events).to.have.length(1_000);
    expect(events.every((e) => e.type === "leave" && e.reason === "expired")).to.equal(true);
    expect(new Set(events.map((e) => e.user)).size).to.equal(1_000);
    expect((await writer!.roster("room")).count).to.equal(0);
  });

  it("sends one command per steady-state heartbeat, where the baseline sends three", async () => {
    const [rc] = await instances(1);
    const seed = new NaiveTracker(client());
    await rc!.heartbeat("room", "ann", "c");
    await seed.updatePresence("room", "ann");
    const admin = client();
    await admin.ping(); // connected before MONITOR starts: its handshake is not in the record
    const monitor = await client().monitor();
    const sent: string[] = [];
    let [fences, expected] = [0, 0];
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (args[0]?.toLowerCase() === "echo") fences++;
      else if (source !== "lua") sent.push(args[0]!.toLowerCase());
    });
    /** MONITOR reports commands in the order they ran: once it reports an ECHO, all before it. */
    const allSeen = async () => {
      const fence = ++expected;
      await admin.echo("fence");
      await eventually(() => fences >= fence);
    };
    for (let i = 0; i < 10; i++) await rc!.heartbeat("room", "ann", "c");
    await allSeen();
    expect(sent.splice(0)).to.deep.equal(Array(10).fill("evalsha"));
    for (let i = 0; i < 10; i++) await seed.updatePresence("room", "ann");
    await allSeen();
    monitor.disconnect();
    expect(sent).to.have.length(30);
    expect(new Set(sent)).to.deep.equal(new Set(["zscore", "zadd", "expire"]));
  });

  it("uses Redis's clock: instances whose clocks differ by minutes agree", async () => {
    const [ahead, behind] = await instances(2, {
      presenceWindowMs: 1_000,
      typingWindowMs: 300,
      keyTtlMs: 3_000,
    });
    const realNow = Date.now;
    const skewed = async <T>(offsetMs: number, call: () => Promise<T>): Promise<T> => {
      Date.now = () => realNow() + offsetMs;
      try {
        return await call();
      } finally {
        Date.now = realNow;
      }
    };
    const before = await redisNow(client());
    await skewed(+10 * 60_000, () => ahead!.heartbeat("room", "ann", "c"));
    await skewed(-10 * 60_000, () => behind!.heartbeat("room", "bob", "c"));
    await skewed(-10 * 60_000, () => behind!.sweepRoom("room"));
    await skewed(+10 * 60_000, () => ahead!.sweepRoom("room"));
    const roster = await ahead!.roster("room");
    expect(roster.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
    // Redis's time of the heartbeats, not the callers' (ten minutes off either way).
    const after = await redisNow(client());
    for (const m of roster.members) expect(m.lastSeen).to.be.within(before, after);
  });
});
