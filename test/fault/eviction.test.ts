import { expect } from "chai";
import { Redis, type RedisOptions } from "ioredis";
import type { RollcallWarning } from "../../src/engine/memoryPolicy.js";
import type { Client } from "../../src/engine/script.js";
import {
  Rollcall,
  Subscriber,
  type RoomWatch,
  type RosterChange,
  type SyncReason,
} from "../../src/index.js";
import { CHECK_MS, CONFIRM_MS } from "../../src/runtime/roomCheck.js";
import { advanceClock, smallShards } from "../kit/clock.js";
import { keySlot, useCluster } from "../kit/cluster.js";
import { IMMEDIATE, client, ownRedis } from "../kit/redis.js";
import { redisWith, stopRedisWith } from "../kit/redisWith.js";
import { eventually } from "../kit/wait.js";

// Nothing a test writes expires or becomes due while it runs, unless the test says so.
const OPTIONS = {
  ...IMMEDIATE,
  presenceWindowMs: 60_000,
  typingWindowMs: 5_000,
  keyTtlMs: 600_000,
};
/**
 * How long a replica may go on claiming members Redis lost: the documented bound (a check every
 * CHECK_MS ± 20 %, confirmed CONFIRM_MS later), plus the reads and the snapshot, on a busy machine.
 */
const BOUND_MS = CHECK_MS * 1.2 + CONFIRM_MS + 5_000;

const subscribers = new Set<Subscriber>();
const connections = new Set<Redis>();

function connect(url: string, options: RedisOptions = {}): Redis {
  const redis = new Redis(url, options);
  connections.add(redis);
  return redis;
}

/**
 * A redis-server of the test's own, to configure, and a connection to it. Emptied first: a
 * server starts with what a dump.rdb in its working directory holds, when another test left one.
 */
async function ownServer() {
  const { url } = await ownRedis();
  const admin = connect(url);
  await admin.flushall();
  return { url, admin };
}

/** A Rollcall whose warnings are collected. */
function warned(redis: Client, options = {}) {
  const rollcall = new Rollcall(redis, { ...OPTIONS, ...options });
  const warnings: RollcallWarning[] = [];
  rollcall.on("warning", (w) => warnings.push(w));
  return { rollcall, warnings };
}

/** A Subscriber of the test's, its errors collected. */
function subscriberOf(rollcall: Rollcall) {
  const subscriber = new Subscriber(rollcall);
  subscribers.add(subscriber);
  const errors: Error[] = [];
  subscriber.on("error", (e) => errors.push(e));
  return { subscriber, errors };
}

/** A watch of the room, its changes and syncs recorded; the subscriber's errors collected. */
async function watched(
  rollcall: Rollcall,
  room: string,
  { subscriber, errors } = subscriberOf(rollcall),
) {
  const watch = await subscriber.watch(room);
  const changes: RosterChange[] = [];
  const syncs: SyncReason[] = [];
  watch.on("change", (c) => changes.push(c));
  watch.on("sync", (r) => syncs.push(r));
  return { watch, changes, syncs, errors };
}

const users = (w: RoomWatch) => w.roster.members.map((m) => m.user);
const said = (changes: RosterChange[]) =>
  changes.map((c) => `${c.type} ${c.user}${c.event ? "" : " (resync)"}`);

afterEach(async () => {
  for (const subscriber of subscribers) subscriber.close();
  subscribers.clear();
  for (const redis of connections) redis.disconnect();
  connections.clear();
  await stopRedisWith();
});

describe("an evicting maxmemory-policy", () => {
  describe("ready()", () => {
    it("warns of any policy but noeviction, volatile-* included, saying why, and fails nothing", async () => {
      const own = await ownServer();
      const { admin } = own;
      for (const policy of ["volatile-lru", "allkeys-lru"]) {
        await admin.config("SET", "maxmemory-policy", policy);
        const { rollcall, warnings } = warned(connect(own.url), { prefix: policy });
        await rollcall.ready();
        expect(warnings.map((w) => w.code)).to.deep.equal(["EVICTING_POLICY"]);
        const [warning] = warnings;
        expect(warning!.message).to.include(`maxmemory-policy ${policy} on 127.0.0.1:`);
        expect(warning!.message).to.match(/volatile-\* included, can drop present members/);
        expect(warning!.message).to.include("Set maxmemory-policy noeviction");
        expect(warning!.policies).to.deep.equal([
          { node: `127.0.0.1:${new URL(own.url).port}`, policy },
        ]);
        // Once per instance: the check is ready()'s, which every call awaits.
        await rollcall.heartbeat("doc", "ann", "c1");
        await rollcall.ready();
        expect(warnings).to.have.length(1);
      }
    });

    it("says nothing under noeviction", async () => {
      const { rollcall, warnings } = warned(client());
      await rollcall.ready();
      await rollcall.heartbeat("doc", "ann", "c1");
      expect(warnings).to.deep.equal([]);
    });

    it("reads the policy from INFO where CONFIG is renamed away, as managed Redis does", async () => {
      const url = await redisWith([
        ...["--rename-command", "CONFIG", ""],
        ...["--maxmemory-policy", "allkeys-lfu"],
      ]);
      const redis = connect(url);
      const refused = await redis.call("CONFIG", "GET", "maxmemory-policy").then(
        () => null,
        (e: Error) => e.message,
      );
      expect(refused).to.match(/unknown command/);
      const { rollcall, warnings } = warned(redis);
      await rollcall.ready();
      expect(warnings.map((w) => [w.code, w.policies.map((p) => p.policy)])).to.deep.equal([
        ["EVICTING_POLICY", ["allkeys-lfu"]],
      ]);
    });

    it("warns that it cannot tell where neither CONFIG nor INFO is allowed", async () => {
      const own = await ownServer();
      await own.admin.call(
        "ACL",
        "SETUSER",
        "blind",
        "on",
        ">secret",
        "~*",
        "&*",
        "+@all",
        "-config",
        "-info",
      );
      const url = new URL(own.url);
      url.username = "blind";
      url.password = "secret";
      // ioredis's ready check reads INFO too.
      const { rollcall, warnings } = warned(connect(url.href, { enableReadyCheck: false }));
      await rollcall.ready();
      expect(warnings.map((w) => w.code)).to.deep.equal(["UNKNOWN_POLICY"]);
      expect(warnings[0]!.message).to.match(
        /^could not read maxmemory-policy \(127\.0\.0\.1:\d+: .*NOPERM.*config.*; .*NOPERM.*info/,
      );
      expect(warnings[0]!.message).to.match(
        /rollcall needs noeviction: check it by other means\.$/,
      );
    });

    it("with no warning listener, tells the process (emitWarning); a listener that throws fails nothing", async () => {
      const own = await ownServer();
      await own.admin.config("SET", "maxmemory-policy", "volatile-ttl");
      const told: Error[] = [];
      // Caught where Node would print it.
      const emitWarning = Object.getOwnPropertyDescriptor(process, "emitWarning")!;
      process.emitWarning = (warning: string | Error) => void told.push(warning as Error);
      try {
        await new Rollcall(connect(own.url), { ...OPTIONS, prefix: "a" }).ready();
        const throwing = new Rollcall(connect(own.url), { ...OPTIONS, prefix: "b" });
        throwing.on("warning", () => {
          throw new Error("a listener's bug");
        });
        await throwing.ready();
        await throwing.heartbeat("doc", "ann", "c1");
      } finally {
        Object.defineProperty(process, "emitWarning", emitWarning);
      }
      expect(told.map((w) => w.name)).to.deep.equal(["RollcallWarning", "Error"]);
      expect(told[0]!.message).to.include("maxmemory-policy volatile-ttl");
      expect(told[1]!.message).to.equal("a listener's bug");
    });
  });

  describe("on a Cluster", () => {
    const { connect: connectCluster, cluster } = useCluster(3);

    it("checks every master, and names the ones that evict", async function () {
      this.timeout(60_000);
      const masters = await cluster().masters();
      const evicting = masters[1]!;
      await cluster().admin(evicting.port).config("SET", "maxmemory-policy", "volatile-lfu");
      try {
        const { rollcall, warnings } = warned(connectCluster());
        await rollcall.ready();
        expect(warnings).to.have.length(1);
        expect(warnings[0]!.policies).to.deep.equal([
          { node: `127.0.0.1:${evicting.port}`, policy: "volatile-lfu" },
        ]);
        expect(warnings[0]!.message).to.include(`volatile-lfu on 127.0.0.1:${evicting.port}`);
      } finally {
        await cluster().admin(evicting.port).config("SET", "maxmemory-policy", "noeviction");
      }
    });

    it("reconcile() finds every master's rooms by SCAN, their due indexes gone", async function () {
      this.timeout(60_000);
      const redis = connectCluster();
      const rc = new Rollcall(redis, { ...OPTIONS, prefix: "scan" });
      const rooms = Array.from({ length: 40 }, (_, i) => `room-${i}`);
      for (const room of rooms) {
        await rc.heartbeat(room, "ann", "a1");
        await rc.heartbeat(room, "bob", "b1");
      }
      const lost = rooms.slice(0, 5);
      for (let b = 0; b < rc.settings.buckets; b++) await redis.del(rc.layout.due(b));
      for (const room of lost) await redis.del(rc.layout.room(room).keys[0]);
      const holders = await Promise.all(
        rooms.map(
          async (r) => (await cluster().nodeForSlot(keySlot(rc.layout.room(r).keys[0]))).port,
        ),
      );
      expect(new Set(holders).size, "masters holding rooms").to.equal(3);

      expect(await rc.reconcile()).to.equal(rc.settings.buckets);
      const total = (await rc.stats()).reduce(
        (t, b) => ({ rooms: t.rooms + b.rooms, users: t.users + b.users }),
        { rooms: 0, users: 0 },
      );
      expect(total).to.deep.equal({ rooms: 35, users: 70 });
    });
  });
});

describe("keys lost without an event (evicted, or deleted by hand to be exact)", () => {
  describe("a RoomWatch", () => {
    it("stops claiming members whose room vanished: it reports them gone within the bound", async function () {
      this.timeout(BOUND_MS + 20_000);
      const rc = new Rollcall(client(), OPTIONS);
      await rc.heartbeat("doc", "ann", "ann-1");
      await rc.heartbeat("doc", "bob", "bob-1");
      await rc.startTyping("doc", "bob");
      const { watch, changes, syncs, errors } = await watched(rc, "doc");
      expect(users(watch)).to.deep.equal(["ann", "bob"]);

      // What an eviction does: the room's hash goes, and nothing is published.
      await client().del(rc.layout.room("doc").keys[0]);
      await eventually(() => users(watch).length === 0, BOUND_MS, "the watch to drop ann and bob");
      expect(said(changes)).to.deep.equal([
        "leave ann (resync)",
        "typing-stop bob (resync)",
        "leave bob (resync)",
      ]);
      expect(syncs).to.deep.equal(["verify"]);
      expect(watch.synced).to.equal(true);
      expect(watch.roster.count).to.equal(0);
      expect((await rc.roster("doc")).members).to.deep.equal([]);
      expect(errors).to.deep.equal([]);
    });

    it("finds the members a lost shard of a big room held, and settles on what Redis still has", async function () {
      this.timeout(BOUND_MS + 20_000);
      smallShards(true); // a room of 3 or more members lives in 4 hashes
      try {
        const rc = new Rollcall(client(), OPTIONS);
        const all = ["u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"];
        for (const user of all) await rc.heartbeat("big", user, "c1");
        const { watch, changes, syncs } = await watched(rc, "big");
        expect(users(watch)).to.deep.equal(all);
        const shard = rc.layout.shard("big", 0);
        const lost = Object.keys(await client().hgetall(shard)).sort();
        expect(lost.length, "the shard holds some members").to.be.greaterThan(0);

        await client().del(shard);
        await eventually(() => syncs.includes("verify"), BOUND_MS, "the watch to resync");
        expect(said(changes)).to.deep.equal(lost.map((u) => `leave ${u} (resync)`));
        expect(users(watch)).to.deep.equal(all.filter((u) => !lost.includes(u)));
        expect(users(watch)).to.deep.equal((await rc.roster("big")).members.map((m) => m.user));
        expect(watch.synced).to.equal(true);
        // What Redis has is now what the replica has: no resync after resync.
        const settled = syncs.length;
        await new Promise((resolve) => setTimeout(resolve, CHECK_MS * 1.2 + CONFIRM_MS + 500));
        expect(syncs).to.have.length(settled);
      } finally {
        smallShards(false);
      }
    });

    it("checks against a mark read as roster() sees the room: sharded or not, a member in its grace included", async () => {
      const rc = new Rollcall(client(), { ...OPTIONS, leaveGraceMs: 5_000 });
      const expectAgree = async (room: string) => {
        const { epoch, seq, count, members } = await rc.roster(room);
        const mark = await rc.mark(room);
        expect(mark, room).to.deep.equal({
          epoch,
          seq: count === 0 ? 0 : seq,
          count,
          records: members.length,
        });
      };
      await expectAgree("empty");
      await rc.heartbeat("small", "ann", "a1");
      await rc.heartbeat("small", "bob", "b1");
      await rc.startTyping("small", "bob");
      await rc.leave("small", "ann", "a1"); // in her leave grace: still a member
      await expectAgree("small");
      smallShards(true);
      try {
        const sharded = new Rollcall(client(), { ...OPTIONS, leaveGraceMs: 5_000 });
        for (const user of ["u0", "u1", "u2", "u3", "u4"])
          await sharded.heartbeat("big", user, "c1");
        await expectAgree("big");
      } finally {
        smallShards(false);
      }
    });

    it("takes no snapshot while Redis and the replica agree, events in flight included", async function () {
      this.timeout(3 * CHECK_MS + 20_000);
      const rc = new Rollcall(client(), { ...OPTIONS, leaveGraceMs: 5_000 });
      await rc.heartbeat("doc", "ann", "ann-1");
      const { watch, syncs } = await watched(rc, "doc");
      // Changes of every kind all along, for more than two checks: every one of them announced.
      const until = performance.now() + 2.5 * CHECK_MS;
      for (let i = 0; performance.now() < until; i++) {
        const user = `u${Math.floor(i / 4) % 3}`;
        await [
          () => rc.heartbeat("doc", user, "c1"),
          () => rc.startTyping("doc", user),
          () => rc.setState("doc", "ann", { i }),
          () => rc.leave("doc", user, "c1"), // into the leave grace, or back out of it next time
        ][i % 4]!();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await eventually(async () => watch.roster.seq === (await rc.roster("doc")).seq);
      expect(syncs).to.deep.equal([]);
      expect(watch.synced).to.equal(true);
      const stored = await rc.roster("doc");
      expect(users(watch)).to.deep.equal(stored.members.map((m) => m.user));
    });
  });

  describe("reconcile()", () => {
    it("re-derives the counts from the rooms' own keys after the due index was lost with some rooms", async () => {
      const rc = new Rollcall(client(), { ...OPTIONS, buckets: 2 });
      const rooms = Array.from({ length: 12 }, (_, i) => `room-${i}`);
      for (const room of rooms) {
        await rc.heartbeat(room, "ann", "a1");
        await rc.heartbeat(room, "ann", "a2");
        await rc.heartbeat(room, "bob", "b1");
      }
      await rc.startTyping("room-0", "bob");
      const lostRooms = rooms.filter((r) => rc.bucketOf(r) === 0).slice(0, 2);
      for (const b of [0, 1]) await client().del(rc.layout.due(b));
      for (const room of lostRooms) await client().del(rc.layout.room(room).keys[0]);

      await rc.reconcile();
      const live = rooms.filter((r) => !lostRooms.includes(r));
      const truth = [0, 1].map((b) => live.filter((r) => rc.bucketOf(r) === b));
      const stats = await rc.stats();
      expect(
        stats.map(({ rooms, users, connections, typing }) => ({
          rooms,
          users,
          connections,
          typing,
        })),
      ).to.deep.equal(
        truth.map((inBucket) => ({
          rooms: inBucket.length,
          users: 2 * inBucket.length,
          connections: 3 * inBucket.length,
          typing: inBucket.includes("room-0") ? 1 : 0,
        })),
      );
      // Every room with members is back in its bucket's due index, which expires again.
      for (const room of live) {
        expect(await client().zscore(rc.layout.due(rc.bucketOf(room)), room), room).to.not.equal(
          null,
        );
      }
      for (const b of [0, 1]) expect(await client().pttl(rc.layout.due(b))).to.be.greaterThan(0);
    });

    it("puts a room back in the due index, so a sweep announces what expired in it", async () => {
      const rc = new Rollcall(client(), OPTIONS);
      await rc.heartbeat("doc", "ann", "a1");
      await client().del(rc.layout.due(rc.bucketOf("doc")));
      await advanceClock(client(), rc, OPTIONS.presenceWindowMs + 1);
      // Lost with its index, the room is never swept: ann would stay present until the key TTL.
      const bucket = rc.bucketOf("doc");
      expect((await rc.sweepBucket(bucket)).leaves).to.equal(0);
      await rc.reconcile();
      expect((await rc.sweepBucket(bucket)).leaves).to.equal(1);
      expect((await rc.roster("doc")).members).to.deep.equal([]);
      expect(await rc.count("doc")).to.deep.equal({ users: 0, connections: 0, typing: 0 });
    });

    it("counts a bucket's rooms a bounded batch per script call, found by SCAN", async function () {
      this.timeout(60_000);
      const rc = new Rollcall(client(), { ...OPTIONS, buckets: 1 });
      const rooms = Array.from({ length: 700 }, (_, i) => `room-${i}`);
      await rc.heartbeatMany(rooms.map((room) => ({ room, user: "ann", connection: "a1" })));
      // Nothing else writes while SCAN runs (the joins' user changes are applied first): a
      // growing keyspace may rehash, and SCAN may then name a key twice.
      await rc.applyUserChanges(0);
      await client().del(rc.layout.due(0));
      const monitor = await client().monitor();
      const batches: number[] = [];
      monitor.on("monitor", (_time: string, args: string[]) => {
        // EVALSHA sha 2 due seq, the settings, the call's number (''), generation, finish,
        // rooms...: of the scripts with 2 keys, reconcile alone names rooms.
        const [command = "", , keys] = args;
        if (/^eval(sha)?$/i.test(command) && keys === "2" && args.length > 9) {
          batches.push(args.length - 9);
        }
      });
      expect(await rc.reconcile()).to.equal(1);
      await client().ping(); // MONITOR's lines come before the reply of a later command
      await eventually(() => batches.reduce((a, b) => a + b, 0) >= rooms.length);
      monitor.disconnect();
      expect(Math.max(...batches)).to.be.at.most(256);
      expect(batches.reduce((a, b) => a + b, 0)).to.equal(rooms.length);
      expect((await rc.stats())[0]).to.include({ rooms: 700, users: 700, connections: 700 });
    });
  });
});

describe("a real eviction (maxmemory reached under volatile-lru)", () => {
  it("is found, not hidden: the warning, every replica back to what Redis has, counts re-derived", async function () {
    this.timeout(BOUND_MS + 90_000);
    const own = await ownServer();
    const { admin } = own;
    await admin.config("SET", "maxmemory-policy", "volatile-lru");
    const { rollcall: rc, warnings } = warned(connect(own.url), { buckets: 4 });
    await rc.ready();
    expect(warnings.map((w) => w.code)).to.deep.equal(["EVICTING_POLICY"]);

    // Enough rooms that one step over the limit (a hash table of Redis's growing included) does
    // not take them all.
    const rooms = Array.from({ length: 150 }, (_, i) => `room-${i}`);
    for (const room of rooms) {
      await rc.heartbeatMany(
        ["ann", "bob", "cy"].map((user) => ({ room, user, connection: `${user}-1` })),
      );
    }
    const shared = subscriberOf(rc);
    const watches = await Promise.all(rooms.map((room) => watched(rc, room, shared)));
    expect(watches.every(({ watch }) => watch.roster.count === 3)).to.equal(true);

    // Memory a little above what is used, then keys without an expiry until Redis evicts: under
    // volatile-lru it evicts only keys with one, and every room's does have one.
    const used = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);
    await admin.config("SET", "maxmemory", String(used + 256 * 1024));
    const present = () => admin.exists(...rooms.map((room) => rc.layout.room(room).keys[0]));
    // A kilobyte at a time: Redis evicts about as much as the last write went over the limit.
    const filler = "x".repeat(1_000);
    for (let i = 0; (await present()) === rooms.length; i++) {
      expect(i, "Redis to evict a room").to.be.below(20_000);
      await admin.set(`filler:${i}`, filler);
    }
    // The operator raises the limit: what was lost stays lost, and nothing more is.
    await admin.config("SET", "maxmemory", "0");
    const left = await present();
    expect(left).to.be.within(1, rooms.length - 1);

    // Every replica is back to what Redis has within the bound, and says so.
    await eventually(
      async () => {
        for (const { watch } of watches) {
          const stored = await rc.roster(watch.room);
          expect(users(watch), watch.room).to.deep.equal(stored.members.map((m) => m.user));
          expect(watch.synced, watch.room).to.equal(true);
        }
        return true;
      },
      BOUND_MS,
      "every replica to match roster()",
    );
    const resynced = watches.filter(({ syncs }) => syncs.includes("verify")).length;
    expect(resynced).to.equal(rooms.length - left);

    // The bucket counts still count the evicted rooms, until a reconcile counts what is there.
    const total = async () => (await rc.stats()).reduce((n, b) => n + b.rooms, 0);
    expect(await total()).to.equal(rooms.length);
    await rc.reconcile();
    expect(await total()).to.equal(left);
    const users_ = (await rc.stats()).reduce((n, b) => n + b.users, 0);
    const counted = await Promise.all(rooms.map(async (room) => (await rc.count(room)).users));
    expect(users_).to.equal(counted.reduce((a, b) => a + b, 0));
    expect(shared.errors).to.deep.equal([]);
  });
});
