import { expect } from "chai";
import type { Cluster, ClusterOptions } from "ioredis";
import { Rollcall, Sweeper, type RollcallOptions, type UserStatus } from "../../src/index.js";
import { KitChild } from "../kit/child.js";
import { keySlot, useCluster, type LocalCluster } from "../kit/cluster.js";
import type { HeartbeatProcessRequest, HeartbeatProcessSettings } from "../kit/heartbeatProcess.js";
import { newSeed, Random } from "../kit/random.js";
import { IMMEDIATE, redisNow } from "../kit/redis.js";
import { resumeClock, stopClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";

/**
 * Users' status on a 3-master, 3-replica cluster: a user's rooms and their status live in other
 * slots, on other masters, written by several instances, one of them killed, and one master
 * failed over. Each transition is published once on the user's bucket's users channel, and
 * status() agrees with what was published.
 */

const SEED = Number(process.env.FAULT_SEED ?? newSeed());
/** A short window: a killed instance's connection expires within the test. */
const SHORT: RollcallOptions = {
  ...IMMEDIATE,
  userStatus: true,
  presenceWindowMs: 1_000,
  typingWindowMs: 300,
  keyTtlMs: 5_000,
};
/** A long window: no connection expires while the test runs. */
const LONG: RollcallOptions = {
  ...IMMEDIATE,
  userStatus: true,
  presenceWindowMs: 30_000,
  keyTtlMs: 90_000,
};
const SWEEP_MS = 100;
/** What a loaded machine may add to a sweep interval before the sweep applies an expiry. */
const SWEEP_TOLERANCE_MS = 1_000;
const FENCE = "fence";

/** A transition as the users channel carries it. */
interface Transition {
  type: "online" | "offline";
  user: string;
  since?: number;
  lastSeenAt?: number;
  epoch: string;
  seq: number;
  prev: number;
}

/** Every message of some buckets' users channels, by channel, as one sharded subscriber hears them. */
class UsersChannels {
  readonly heard = new Map<string, Transition[]>();
  private fences = 0;

  private constructor(private readonly subscriber: Cluster) {
    subscriber.on("smessage", (channel: string, message: string) => {
      if (message === FENCE) this.fences++;
      else
        this.heard.set(channel, [
          ...(this.heard.get(channel) ?? []),
          JSON.parse(message) as Transition,
        ]);
    });
  }

  static async of(subscriber: Cluster, channels: string[]): Promise<UsersChannels> {
    const listening = new UsersChannels(subscriber);
    for (const channel of channels) await subscriber.ssubscribe(channel);
    return listening;
  }

  /** Every transition heard of `user`, in the order published (a user's go on one channel). */
  of(user: string): Transition[] {
    return [...this.heard.values()].flat().filter((t) => t.user === user);
  }

  /**
   * Resolves once everything published on the channels before the call was heard: a fence
   * published on each arrives after what each had carried.
   */
  async caughtUp(publisher: Cluster, channels: string[]): Promise<void> {
    const until = this.fences + channels.length;
    for (const channel of channels) await publisher.spublish(channel, FENCE);
    await eventually(() => this.fences >= until, 10_000, "the fences");
  }
}

/** The master serving a bucket's slot now. */
async function masterOf(cluster: LocalCluster, rc: Rollcall, bucket: number): Promise<string> {
  return (await cluster.nodeForSlot(keySlot(rc.layout.tag(bucket)))).id;
}

/** The first room of room0, room1... whose bucket and its master pass `fits`. */
async function roomWhere(
  cluster: LocalCluster,
  rc: Rollcall,
  fits: (master: string, bucket: number) => boolean,
): Promise<string> {
  for (let i = 0; ; i++) {
    const bucket = rc.bucketOf(`room${i}`);
    if (fits(await masterOf(cluster, rc, bucket), bucket)) return `room${i}`;
  }
}

const buckets = (rc: Rollcall) => Array.from({ length: rc.settings.buckets }, (_, b) => b);
const channelsOf = (rc: Rollcall, of: number[]) => of.map((b) => rc.usersChannel(b));

async function statusOf(rc: Rollcall, user: string): Promise<UserStatus> {
  return (await rc.status([user]))[0]!;
}

/** Applies every bucket's pending user changes (and waits for drains already running). */
async function applyAll(rc: Rollcall): Promise<number> {
  const made = await Promise.all(buckets(rc).map((b) => rc.applyUserChanges(b)));
  return made.reduce((a, b) => a + b, 0);
}

describe("users' status on a 3-master, 3-replica cluster", function () {
  this.timeout(60_000);
  const { connect, cluster } = useCluster(3, { replicas: 1 });
  // Clients that live through the failover: what they report meanwhile is no failure.
  const quiet = (options: ClusterOptions = {}) => connect(options).on("error", () => undefined);
  before(() => console.log(`  users cluster seed ${SEED} (FAULT_SEED=${SEED} replays it)`));

  it("goes offline once when the user's two rooms end on other masters, one by a killed instance", async () => {
    const options = { ...SHORT, prefix: "uk" };
    const rc = new Rollcall(connect(), options);
    const user = "ann";
    const own = rc.userBucket(user);
    const ownMaster = await masterOf(cluster(), rc, own);
    // Two rooms on the two other masters: three buckets, three masters.
    const left = await roomWhere(cluster(), rc, (master) => master !== ownMaster);
    const leftMaster = await masterOf(cluster(), rc, rc.bucketOf(left));
    const killed = await roomWhere(cluster(), rc, (m) => m !== ownMaster && m !== leftMaster);
    expect(new Set([own, rc.bucketOf(left), rc.bucketOf(killed)]).size).to.equal(3);

    const channel = rc.usersChannel(own);
    const listening = await UsersChannels.of(connect({ shardedSubscribers: true }), [channel]);
    const settings: HeartbeatProcessSettings = {
      nodes: cluster().nodes,
      options,
      room: killed,
      user,
      connection: "tab-2",
      everyMs: 200,
    };
    const child = KitChild.start("test/kit/heartbeatProcess.ts", settings);
    let sweeper: Sweeper | undefined;
    try {
      // The clock stands still until the child is killed: nothing expires before, however long
      // the child takes to start.
      const at = await redisNow(rc.redis as never);
      await stopClock(rc.redis, rc, at);
      const start: HeartbeatProcessRequest = { type: "start" };
      expect(await child.request<boolean>(start), "the child's join").to.equal(true);
      expect((await rc.heartbeat(left, user, "tab-1")).joined).to.equal(true);
      await eventually(async () => (await statusOf(rc, user)).online, 5_000, "ann online");
      const online = await statusOf(rc, user);
      expect(online).to.deep.equal({ user, online: true, since: at, lastSeenAt: null });
      const asked: HeartbeatProcessRequest = { type: "status", users: [user] };
      expect(await child.request<UserStatus[]>(asked), "the child's status()").to.deep.equal([
        online,
      ]);

      // The clean leave: still online in the other room.
      expect((await rc.leave(left, user, "tab-1")).left).to.equal(true);
      await rc.applyUserChanges(rc.bucketOf(left));
      expect(await statusOf(rc, user)).to.deep.equal(online);

      await child.kill();
      const member = (await rc.roster(killed)).members.find((m) => m.user === user);
      expect(member?.lastSeen, "ann's last heartbeat in the killed instance's room").to.equal(at);
      const expiry = at + options.presenceWindowMs!;
      await resumeClock(rc.redis, rc);
      sweeper = new Sweeper(rc, { intervalMs: SWEEP_MS });
      sweeper.start();
      await eventually(async () => !(await statusOf(rc, user)).online, 10_000, "ann offline");
      await sweeper.stop();
      await applyAll(rc);
      await listening.caughtUp(rc.redis as Cluster, [channel]);

      const offline = await statusOf(rc, user);
      expect(offline).to.deep.include({ online: false, since: null });
      expect(offline.lastSeenAt).to.be.at.least(expiry);
      expect(offline.lastSeenAt).to.be.at.most(expiry + SWEEP_MS + SWEEP_TOLERANCE_MS);
      const heard = listening.of(user);
      expect(heard.map((t) => t.type)).to.deep.equal(["online", "offline"]);
      expect(heard[0]!.since).to.equal(online.since);
      expect(heard[1]!.lastSeenAt).to.equal(offline.lastSeenAt);
    } finally {
      await sweeper?.stop();
      await child.kill();
    }
  });

  it("publishes each transition once while several instances drain every bucket at once", async () => {
    const options = { ...LONG, prefix: "uc" };
    const instances = Array.from({ length: 4 }, () => new Rollcall(connect(), options));
    const rc = instances[0]!;
    const rng = new Random(SEED);
    const users = Array.from({ length: 10 }, (_, i) => `u${i}`);
    // Rooms of distinct buckets, two on each master, taken in turn: neighbours are on two masters.
    const byMaster = new Map<string, string[]>();
    const seen = new Set<number>();
    for (let i = 0; seen.size < rc.settings.buckets; i++) {
      const room = `room${i}`;
      if (seen.has(rc.bucketOf(room))) continue;
      seen.add(rc.bucketOf(room));
      const master = await masterOf(cluster(), rc, rc.bucketOf(room));
      byMaster.set(master, [...(byMaster.get(master) ?? []), room]);
    }
    expect(byMaster.size, "masters").to.equal(3);
    const rooms = [0, 1].flatMap((k) => [...byMaster.values()].map((its) => its[k]!));

    const channels = channelsOf(rc, buckets(rc));
    const listening = await UsersChannels.of(connect({ shardedSubscribers: true }), channels);

    let writing = true;
    const drainers = instances.map(async (instance) => {
      while (writing) await applyAll(instance);
    });
    // Each user's own sequence of joins and leaves in two rooms of other masters (so that they
    // go offline often), through any instance; users at once.
    const present = new Map(users.map((user) => [user, new Set<string>()]));
    const made = new Map(users.map((user) => [user, { online: 0, offline: 0 }]));
    const writers = users.map(async (user, u) => {
      const own = rng.fork();
      const its = present.get(user)!;
      const pair = [rooms[u % rooms.length]!, rooms[(u + 1) % rooms.length]!];
      for (let op = 0; op < 30; op++) {
        const room = own.pick(pair);
        const instance = own.pick(instances);
        if (its.has(room)) {
          expect((await instance.leave(room, user, "c")).left).to.equal(true);
          its.delete(room);
          made.get(user)!.offline++;
        } else {
          expect((await instance.heartbeat(room, user, "c")).joined).to.equal(true);
          its.add(room);
          made.get(user)!.online++;
        }
      }
    });
    try {
      await Promise.all(writers);
    } finally {
      writing = false;
      await Promise.all(drainers);
    }
    await applyAll(rc);
    await listening.caughtUp(rc.redis as Cluster, channels);

    const statuses = await rc.status(users);
    for (const [i, user] of users.entries()) {
      const heard = listening.of(user);
      const types = heard.map((t) => t.type);
      const expected = types.map((_, k) => (k % 2 === 0 ? "online" : "offline"));
      expect(types, `${user}'s transitions`).to.deep.equal(expected);
      // Each comes of a join or a leave applied once: never more than the user made.
      const { online: joins, offline: leaves } = made.get(user)!;
      expect(types.filter((t) => t === "online").length, `${user}'s onlines`).to.be.at.most(joins);
      expect(types.filter((t) => t === "offline").length, `${user}'s offlines`).to.be.at.most(
        leaves,
      );
      const online = present.get(user)!.size > 0;
      expect(statuses[i]!.online, `${user} online`).to.equal(online);
      const last = heard.at(-1);
      expect(last?.type, `${user}'s last transition`).to.equal(online ? "online" : "offline");
      if (online) expect(statuses[i]!.since).to.equal(last!.since);
      else expect(statuses[i]!.lastSeenAt).to.equal(last!.lastSeenAt);
    }
    const heard = [...listening.heard.values()].flat();
    expect(heard.length, "transitions: users went online and offline again").to.be.above(
      users.length * 4,
    );
    // Each bucket numbered its transitions 1, 2, 3...: none published twice, none skipped.
    for (const [channel, heard] of listening.heard) {
      const seqs = heard.map((t) => t.seq);
      expect(seqs, channel).to.deep.equal(seqs.map((_, k) => k + 1));
      expect(new Set(heard.map((t) => t.epoch)).size, `${channel}'s epochs`).to.equal(1);
    }
    // Everything was applied: nothing is left in the streams, and a drain finds nothing to do.
    expect(await applyAll(new Rollcall(connect(), options))).to.equal(0);
  });

  it("reads the status of 300 users of every bucket in the order asked", async () => {
    const options = { ...LONG, prefix: "us" };
    const rc = new Rollcall(connect(), options);
    const users = Array.from({ length: 300 }, (_, i) => `user-${i}`);
    expect(new Set(users.map((u) => rc.userBucket(u))).size, "buckets").to.equal(16);
    // A third online, a third online then gone, a third never seen.
    const kindOf = (i: number) => (["online", "gone", "unseen"] as const)[i % 3]!;
    const entries = users
      .filter((_, i) => kindOf(i) !== "unseen")
      .map((user, i) => ({ room: `room${i % 20}`, user, connection: "c" }));
    for (const outcome of await rc.heartbeatMany(entries)) {
      expect(outcome).to.deep.include({ joined: true });
    }
    const gone = entries.filter(({ user }) => kindOf(users.indexOf(user)) === "gone");
    for (const { room, user } of gone) await rc.leave(room, user, "c");
    await applyAll(rc);

    const asked = new Random(SEED).fork();
    const keys = new Map(users.map((user) => [user, asked.next()]));
    const order = [...users].sort((a, b) => keys.get(a)! - keys.get(b)!);
    const statuses = await new Rollcall(connect(), options).status(order);
    expect(statuses.map((s) => s.user)).to.deep.equal(order);
    for (const status of statuses) {
      const kind = kindOf(users.indexOf(status.user));
      expect(status.online, status.user).to.equal(kind === "online");
      expect(status.since !== null, `${status.user}'s since`).to.equal(kind === "online");
      expect(status.lastSeenAt !== null, `${status.user}'s lastSeenAt`).to.equal(kind === "gone");
    }
  });

  it("goes offline once after the master of the user's status failed over while online", async () => {
    const options = { ...LONG, prefix: "uf" };
    const rc = new Rollcall(quiet(), options);
    const user = "bob";
    const own = rc.userBucket(user);
    const master = await masterOf(cluster(), rc, own);
    // A room on the same master (its epoch changes too), and one on another master.
    const near = await roomWhere(cluster(), rc, (m, bucket) => m === master && bucket !== own);
    const far = await roomWhere(cluster(), rc, (m) => m !== master);
    const channel = rc.usersChannel(own);
    const before = await UsersChannels.of(quiet({ shardedSubscribers: true }), [channel]);
    await rc.heartbeat(near, user, "c");
    await rc.heartbeat(far, user, "c");
    await eventually(async () => (await statusOf(rc, user)).online, 5_000, "bob online");
    const online = await statusOf(rc, user);
    await before.caughtUp(rc.redis as Cluster, [channel]);
    expect(before.of(user).map((t) => t.type)).to.deep.equal(["online"]);

    const replica = (await cluster().replicas()).find((r) => r.masterId === master)!;
    await cluster().failover(replica.port);
    await cluster().waitForReplicas();
    expect(await masterOf(cluster(), rc, own), "the promoted replica").to.not.equal(master);
    expect(await statusOf(rc, user)).to.deep.equal(online);

    // A subscriber of the promoted master hears what comes next.
    const after = await UsersChannels.of(quiet({ shardedSubscribers: true }), [channel]);
    const drainer = new Rollcall(quiet(), options);
    await Promise.all([rc.leave(near, user, "c"), rc.leave(far, user, "c")]);
    await Promise.all([applyAll(rc), applyAll(drainer)]);
    await eventually(async () => !(await statusOf(rc, user)).online, 5_000, "bob offline");
    expect(await applyAll(drainer), "changes left to apply").to.equal(0);
    await after.caughtUp(rc.redis as Cluster, [channel]);
    const heard = after.of(user);
    expect(heard.map((t) => t.type)).to.deep.equal(["offline"]);
    expect(heard[0]!.lastSeenAt).to.equal((await statusOf(rc, user)).lastSeenAt);
    expect(heard[0]!.epoch, "a new epoch on the promoted master").to.not.equal(
      before.of(user)[0]!.epoch,
    );
  });
});
