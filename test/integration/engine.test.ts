import { randomUUID } from "node:crypto";
import { expect } from "chai";
import { Rollcall, SettingsMismatchError } from "../../src/index.js";
import { Scripts } from "../../src/engine/script.js";
import { heartbeat } from "../../src/engine/scripts/heartbeat.js";
import { sweep } from "../../src/engine/scripts/sweep.js";
import { packSettings } from "../../src/engine/settings.js";
import { advanceClock, passTime, stopClock } from "../kit/clock.js";
import { caughtUp, IMMEDIATE, client, listen } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

const SHORT = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000 };
const users = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `u${i + from}`);

/** How many times Redis ran each command since the last CONFIG RESETSTAT. */
async function commandCalls(rc: Rollcall): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  const stats = String(await rc.redis.info("commandstats"));
  for (const [, name, n] of stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g))
    calls.set(name!, Number(n));
  return calls;
}

describe("engine layout", () => {
  it("keeps each room in its own keys, a record per user, and no index below 129 members", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    await rc.heartbeat("room", "ann", "c1", { state: { status: "online" } });
    await rc.heartbeat("room", "ann", "c2");
    const [room, index, due] = rc.layout.room("room").keys;
    expect(await rc.redis.hlen(room)).to.equal(2); // ann and the room's '' field
    expect(await rc.redis.exists(index)).to.equal(0);
    expect(await rc.redis.zscore(due, "room")).to.be.a("string");
    expect(await rc.redis.object("ENCODING", room)).to.equal("listpack");
    // joinedAt 6 + flags 1 + two connections (1 + 2 + 6 each) + {"status":"online"} 19
    expect(await rc.redis.hstrlen(room, "ann")).to.equal(6 + 1 + 2 * 9 + 19);
  });

  it("stores long connection ids as digests: two UUID tabs and a state stay compact", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const [a, b] = [randomUUID(), randomUUID()];
    for (const user of users(128)) {
      await rc.heartbeat("room", user, a, { state: { status: "online" } });
      await rc.heartbeat("room", user, b);
    }
    const [room] = rc.layout.room("room").keys;
    expect(await rc.redis.hstrlen(room, "u0")).to.be.at.most(64);
    expect(await rc.redis.object("ENCODING", room)).to.equal("listpack");
    expect((await rc.roster("room")).members[0]!.connections).to.equal(2);
    expect(await rc.leave("room", "u0", a)).to.deep.include({ removed: true, left: false });
    expect(await rc.leave("room", "u0", a)).to.deep.include({ removed: false });
    expect(await rc.leave("room", "u0", b)).to.deep.include({ removed: true, left: true });
  });

  it("builds a room's index past 128 members and drops it at 64", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, eventRosterLimit: 5 });
    const events = await listen([rc.channel("big")]);
    const [, index] = rc.layout.room("big").keys;
    for (const user of users(128)) await rc.heartbeat("big", user, "c");
    expect(await rc.redis.exists(index)).to.equal(0);
    await rc.heartbeat("big", "u128", "c");
    expect(await rc.redis.zcard(index)).to.equal(129);
    await eventually(() => events.length === 129);
    expect(events[128]).to.deep.include({ count: 129 });
    expect((events[128] as { roster: string[] }).roster).to.have.length(5);
    for (const user of users(64)) await rc.leave("big", user, "c");
    expect(await rc.redis.zcard(index)).to.equal(65);
    await rc.leave("big", "u64", "c");
    expect(await rc.redis.exists(index)).to.equal(0);
    const roster = await rc.roster("big");
    expect(roster.count).to.equal(64);
    expect(roster.members.map((m) => m.user)).to.have.members(users(64, 65));
  });

  it("sweeps a big room in batches: each silent member once, the live ones untouched", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...SHORT, eventRosterLimit: 0 });
    const events = await listen([rc.channel("big")]);
    const silent = users(200);
    const live = users(50, 200);
    await Promise.all([...silent, ...live].map((u) => rc.heartbeat("big", u, "c")));
    for (let i = 0; i < 6; i++) {
      await advanceClock(rc.redis, rc, 200);
      await Promise.all(live.map((u) => rc.heartbeat("big", u, "c")));
    }
    const swept = await rc.sweepRoom("big", { batch: 16 });
    expect(swept).to.deep.include({ leaves: 200, connections: 200 });
    expect(swept.calls).to.be.at.least(13);
    await eventually(() => events.length === 450);
    const leaves = events.filter((e) => e.type === "leave");
    expect(new Set(leaves.map((e) => e.user))).to.deep.equal(new Set(silent));
    expect((await rc.roster("big")).members.map((m) => m.user)).to.have.members(live);
  });

  it("settles a steady heartbeat with the room's hash alone: no index, no due entry, no event", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    // The connection's first beat after its join looks its reply up (it may be the join, resent):
    // so the join, then a beat a millisecond later, then the one counted.
    await stopClock(rc.redis, rc, 1_700_000_000_000);
    await rc.heartbeat("room", "ann", "c");
    await rc.applyUserChanges(rc.bucketOf("room")); // the join's user change, applied after it
    await stopClock(rc.redis, rc, 1_700_000_000_001);
    await rc.heartbeat("room", "ann", "c");
    await rc.redis.config("RESETSTAT");
    expect(await rc.heartbeat("room", "ann", "c")).to.deep.equal({
      joined: false,
      full: false,
      event: null,
    });
    const calls = await commandCalls(rc);
    calls.delete("config");
    calls.delete("info");
    // TIME and GET: Redis's clock, moved by the tests' clock (test/kit/clock.ts).
    expect(Object.fromEntries(calls)).to.deep.equal({
      evalsha: 1,
      time: 1,
      get: 1,
      hmget: 1,
      hset: 1,
    });
  });

  it("patches a user's two connections in one steady batch, each beat kept", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...SHORT });
    const batch = [
      { room: "room", user: "ann", connection: "c1" },
      { room: "room", user: "bob", connection: "c" },
      { room: "room", user: "ann", connection: "c2" },
    ];
    // The joins, then each connection's first beat after its join (not steady), then the batch:
    // all in one quarter of the key TTL (750 ms, from ...250), where a beat refreshes no expiry.
    await stopClock(rc.redis, rc, 1_700_000_000_250);
    await rc.heartbeatMany(batch);
    await rc.applyUserChanges(rc.bucketOf("room")); // the joins' user changes, applied after them
    await stopClock(rc.redis, rc, 1_700_000_000_251);
    await rc.heartbeatMany(batch);
    await stopClock(rc.redis, rc, 1_700_000_000_750);
    await rc.redis.config("RESETSTAT");
    const outcomes = await rc.heartbeatMany(batch);
    expect(outcomes.map((o) => "joined" in o && !o.joined && !o.event)).to.deep.equal([
      true,
      true,
      true,
    ]);
    const calls = await commandCalls(rc);
    // Steady: ann's second connection went in a second run of the room, after the first's HSET.
    expect([calls.get("hmget"), calls.get("hset"), calls.get("evalsha")]).to.deep.equal([2, 2, 1]);
    // Past the window of the beats before the batch: a connection whose batched beat was lost
    // would expire now.
    await stopClock(rc.redis, rc, 1_700_000_001_450);
    expect(await rc.sweepRoom("room")).to.deep.include({ connections: 0, leaves: 0 });
    expect(await rc.count("room")).to.deep.include({ users: 2, connections: 3 });
  });

  it("numbers events within an epoch that roster() and every event carry", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const events = await listen([rc.channel("room")]);
    await rc.heartbeat("room", "ann", "c");
    const { event } = await rc.startTyping("room", "ann");
    await eventually(() => events.length === 2);
    const roster = await rc.roster("room");
    expect(events.map((e) => e.epoch)).to.deep.equal([roster.epoch, roster.epoch]);
    expect(event).to.deep.equal({ epoch: roster.epoch, seq: events[1]!.seq });
    expect(roster.seq).to.equal(events[1]!.seq);
  });

  it("starts a new epoch when the counter's owner is another Redis process", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    await rc.heartbeat("room", "ann", "c");
    const before = await rc.roster("room");
    // What a failover or a restart leaves behind: the counter, written by another process.
    await rc.redis.hset(rc.layout.room("room").keys[3], "node", "another-process");
    const { event } = await rc.startTyping("room", "ann");
    expect(event!.epoch).to.not.equal(before.epoch);
    expect((await rc.roster("room")).epoch).to.equal(event!.epoch);
  });

  it("starts it in a roster read too, when that comes first, and the next events follow it", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    await rc.heartbeat("room", "ann", "c");
    const before = await rc.roster("room");
    await rc.redis.hset(rc.layout.room("room").keys[3], "node", "another-process");
    const after = await rc.roster("room");
    expect(after.epoch).to.not.equal(before.epoch);
    expect((await rc.roster("room")).epoch).to.equal(after.epoch);
    const { event } = await rc.startTyping("room", "ann");
    expect(event!.epoch).to.equal(after.epoch);
  });
});

describe("deployment settings", () => {
  it("are stored by the first call that changes something, never by a read", async () => {
    const redis = client();
    const rc = new Rollcall(redis, IMMEDIATE);
    const roster = await rc.roster("never-used");
    expect(roster).to.deep.include({ epoch: "", seq: 0, count: 0, members: [] });
    expect(await rc.count("never-used")).to.deep.equal({ users: 0, connections: 0, typing: 0 });
    await rc.stats();
    expect(await redis.dbsize(), "keys a read left").to.equal(0);
    // The first change stores them; a read after it still checks them.
    await rc.heartbeat("room", "ann", "c");
    expect(await redis.exists(rc.layout.deployment)).to.equal(1);
    const other = new Rollcall(client(), { ...IMMEDIATE, presenceWindowMs: 30_000 });
    expect(await other.roster("room").catch((e: unknown) => e)).to.be.instanceOf(
      SettingsMismatchError,
    );
  });

  it("refuses an instance whose settings differ from the deployment's, with a typed error", async () => {
    const first = new Rollcall(client(), { ...IMMEDIATE, presenceWindowMs: 30_000 });
    await first.heartbeat("room", "ann", "c");
    const other = new Rollcall(client(), { ...IMMEDIATE, presenceWindowMs: 45_000, buckets: 8 });
    const error = await other.heartbeat("room", "bob", "c").catch((e: unknown) => e);
    expect(error)
      .to.be.instanceOf(SettingsMismatchError)
      .with.property("code", "SETTINGS_MISMATCH");
    expect((error as SettingsMismatchError).differences).to.deep.equal([
      "buckets is 16 there, 8 here",
      "presenceWindowMs is 30000 there, 45000 here",
    ]);
    await other.ready().catch((e: unknown) => expect(e).to.equal(error));
    expect((await first.roster("room")).members.map((m) => m.user)).to.deep.equal(["ann"]);
    // Settings that only shape what one instance reads or sends may differ.
    await new Rollcall(client(), {
      ...IMMEDIATE,
      presenceWindowMs: 30_000,
      rosterLimit: 5,
    }).ready();
  });
});

describe("replies of resent calls", () => {
  // Internal: the raw script, run twice with one call number, as a client resending it would.
  async function run(scripts: Scripts, rc: Rollcall, call: number, user: string) {
    const { bucket } = rc.layout.room("room");
    const s = rc.settings;
    const [result] = await scripts.run(
      heartbeat,
      [...rc.layout.bucketKeys(bucket), replayKey(rc)],
      [packSettings(s), call],
      { rooms: [{ room: "room", entries: [{ user, connection: "c", options: "" }] }], size: 1 },
    );
    if (!result || "error" in result) throw new Error("the heartbeat was refused");
    return result;
  }
  const replayKey = (rc: Rollcall) => rc.layout.replay(rc.layout.room("room").bucket, "test", 0);

  it("gives a resent call the first run's reply, and runs nothing twice", async () => {
    const redis = client();
    const rc = new Rollcall(redis, { ...IMMEDIATE, replayWindowMs: 1_000 });
    const scripts = new Scripts(redis);
    const events = await listen([rc.channel("room")]);
    const first = await run(scripts, rc, 1, "ann");
    expect(first.joined).to.equal(true);
    expect(await run(scripts, rc, 1, "ann")).to.deep.equal(first);
    // Another call is another call: the user is present now.
    expect(await run(scripts, rc, 2, "ann")).to.deep.equal({
      joined: false,
      full: false,
      event: null,
    });
    await caughtUp(events);
    expect(events.map((e) => e.type)).to.deep.equal(["join"]);
    // The reply is kept for the replay window only.
    await passTime(redis, rc, 1_001);
    expect(await rc.redis.exists(replayKey(rc))).to.equal(0);
    expect(await run(scripts, rc, 1, "ann")).to.deep.equal({
      joined: false,
      full: false,
      event: null,
    });
  });
  it("keeps each generation's replies in a string of its own", async function () {
    this.timeout(60_000);
    const redis = client();
    const rc = new Rollcall(redis, { ...IMMEDIATE, buckets: 1, replayWindowMs: 60_000 });
    // One join per call, one past a generation (1,024 calls): each keeps its reply.
    for (let i = 0; i <= 1_024; i++) await rc.heartbeat(`room${i}`, "ann", "c");
    const kept: string[] = [];
    for await (const keys of redis.scanStream({ match: "*:r:*" })) kept.push(...(keys as string[]));
    expect(kept.map((key) => key.split(":").at(-1)).sort()).to.deep.equal(["0", "1"]);
    expect(await redis.strlen(kept.find((key) => key.endsWith(":1"))!)).to.be.greaterThan(2);
  });

  it("gives a resent sweep its counts, past 65,535 connections dropped in one call", async function () {
    this.timeout(120_000);
    const redis = client();
    const rc = new Rollcall(redis, { ...IMMEDIATE, replayWindowMs: 60_000 });
    // 1,030 users of 64 connections each: 65,920 connections, more than 16 bits count.
    const connections = Array.from({ length: 64 }, (_, c) => `c${c}`);
    const beats = users(1_030).flatMap((user) =>
      connections.map((connection) => ({ room: "room", user, connection })),
    );
    for (let i = 0; i < beats.length; i += 4_096) await rc.heartbeatMany(beats.slice(i, i + 4_096));
    expect((await rc.count("room")).connections).to.equal(65_920);
    await advanceClock(redis, rc, rc.settings.presenceWindowMs + 1);
    const { bucket } = rc.layout.room("room");
    const s = rc.settings;
    const once = () =>
      new Scripts(redis).run(
        sweep,
        [...rc.layout.bucketKeys(bucket), rc.layout.replay(bucket, "test", 0)],
        [packSettings(s), 7, "room"],
        { batch: 10_000, rooms: 1 },
      );
    const first = await once();
    expect(first).to.deep.include({ connections: 65_920, leaves: 1_030, typingStops: 0 });
    expect(await once()).to.deep.include({ connections: 65_920, leaves: 1_030, more: false });
  });
});
