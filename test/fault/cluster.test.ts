import { expect } from "chai";
import { Cluster } from "ioredis";
import type { Room, RollcallClient } from "../../src/client/index.js";
import { Gateway } from "../../src/gateway/index.js";
import {
  checkEvent,
  type HeartbeatResult,
  LogConsumer,
  Rollcall,
  Subscriber,
  Sweeper,
  type PresenceEvent,
  type ReplicaRoster,
  type RollcallOptions,
  type Roster,
  type RoomWatch,
} from "../../src/index.js";
import { audit, explain, table, type Audit, type Logged } from "../kit/audit.js";
import { newSeed, Random } from "../kit/random.js";
import { asReplica } from "../kit/rosters.js";
import { randomCall } from "../kit/traffic.js";
import { keySlot, startCluster, type LocalCluster, type NodeInfo } from "../kit/cluster.js";
import { connect, SECRET } from "../kit/gateway.js";
import type { CallRecord } from "../kit/invariants.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

/**
 * Faults on a real cluster (3 masters, 3 replicas, no persistence) while writers, sweepers, a log
 * consumer, a subscriber, RoomWatch replicas and a gateway with its clients run. After each one,
 * everything is left to expire and the record is checked: the log complete within each epoch, call
 * results matching it, no number ever carried by two events, replicas converged to roster(), no
 * unhandled rejection. What each fault costs (failed calls, pub/sub losses, writes lost with a
 * forced failover or a killed master) is measured and printed, not asserted.
 */

const SEED = Number(process.env.FAULT_SEED ?? newSeed());
const ENGINE: RollcallOptions = {
  presenceWindowMs: 2_000,
  typingWindowMs: 500,
  keyTtlMs: 60_000,
  // Short, so that graced leaves are published within the run.
  leaveGraceMs: 1_000,
  // Large enough that nothing is trimmed during a run.
  logLength: 100_000,
};
const USERS = ["u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"];
const GATEWAY_USERS = ["gw-ann", "gw-bob"];
const WRITERS = 4;
const SWEEPERS = 3;
/** Calls answered before the fault, and after it (the cluster healed), counted. */
const WARMUP_CALLS = 600;
const AFTERMATH_CALLS = 600;

/** A scenario's view of its fault target. */
interface Target {
  cluster: LocalCluster;
  /** The master serving the faulted bucket when the fault starts, and its replica. */
  master: NodeInfo;
  replica: NodeInfo;
  /** The faulted bucket's slot. */
  slot: number;
  /** Resolves once the writers have had `n` more calls answered. */
  traffic(n: number): Promise<void>;
}

interface Row {
  fault: string;
  calls: number;
  failed: number;
  resolved: number;
  "log events": number;
  "pubsub seen": number;
  "pubsub missed": number;
  "pubsub gaps": number;
  epochs: number;
  "bucket epochs": number;
  duplicates: number;
  redelivered: number;
  "lost writes": string;
  "log lost": number;
  "watch resyncs": string;
  "client resyncs": number;
  "errors reported": number;
  "fault ms": number;
  "run s": number;
  violations: number;
}

const rows: Row[] = [];

/** Waits until `check` returns null (converged); fails with its last word after a while. */
function converge(check: () => Promise<string | null>, what: string, ms = 15_000) {
  const converged = async () => {
    const diff = await check();
    if (diff !== null) throw new Error(diff);
    return true;
  };
  return eventually(converged, ms, `${what} to converge`);
}

/** The parts of a roster a replica keeps; equal when a replica has converged. */
function shape(r: Roster | ReplicaRoster) {
  const { members, typing } = asReplica(r);
  return { members, typing };
}

function differs(expected: Roster, replica: ReplicaRoster, synced: boolean): string | null {
  const [a, b] = [JSON.stringify(shape(expected)), JSON.stringify(shape(replica))];
  if (a === b) return null;
  const where = (r: Roster | ReplicaRoster) => `${r.epoch}/${r.seq}`;
  return (
    `roster() at ${where(expected)}: ${a}; replica at ${where(replica)} ` +
    `(${synced ? "synced" : "not synced"}): ${b}`
  );
}

/** Rooms on the faulted bucket, on other buckets of its master, and on the other masters. */
function pickRooms(probe: Rollcall, masters: NodeInfo[], target: Target): string[] {
  const ownerOf = (slot: number) =>
    masters.find((m) => m.slots.some(([a, b]) => a <= slot && slot <= b))!.id;
  const onBucket: string[] = [];
  const onMaster: string[] = [];
  const elsewhere = new Map<string, string[]>();
  for (let i = 0; onBucket.length < 3 || onMaster.length < 2 || elsewhere.size < 2; i++) {
    const room = `room${i}`;
    const bucket = probe.layout.room(room).bucket;
    const slot = keySlot(probe.layout.tag(bucket));
    const owner = ownerOf(slot);
    if (slot === target.slot) onBucket.push(room);
    else if (owner === target.master.id) onMaster.push(room);
    else elsewhere.set(owner, [...(elsewhere.get(owner) ?? []), room]);
  }
  const others = [...elsewhere.values()].flatMap((rooms) => rooms.slice(0, 2));
  return [...onBucket.slice(0, 3), ...onMaster.slice(0, 2), ...others.slice(0, 3)];
}

/** Reads every bucket's stream as it is now. */
async function readLog(rc: Rollcall): Promise<Logged[]> {
  const stored: Logged[] = [];
  for (let bucket = 0; bucket < rc.settings.buckets; bucket++) {
    const entries = await rc.redis.xrange(rc.layout.log(bucket), "-", "+");
    for (const [id, fields] of entries) {
      stored.push({ bucket, id, event: checkEvent(JSON.parse(fields[1]!)) });
    }
  }
  return stored;
}

/**
 * One fault under traffic, start to finish: observers and traffic up, the fault, traffic on, then
 * quiet until everything expired, convergence checks, and the audit of the whole record.
 */
async function scenario(
  cluster: LocalCluster,
  fault: string,
  prefix: string,
  lossAllowed: boolean,
  inject: (target: Target) => Promise<void>,
): Promise<Audit> {
  const started = Date.now();
  const rng = new Random(SEED ^ prefix.charCodeAt(1));
  const unhandled = watchUnhandled();
  const errors = { redis: 0, sweeper: 0, consumer: 0, subscriber: 0, gateway: 0, room: 0 };
  const connections: Cluster[] = [];
  const engine = { ...ENGINE, prefix };
  const open = () => {
    const redis = new Cluster(cluster.nodes);
    redis.on("error", () => errors.redis++);
    connections.push(redis);
    return new Rollcall(redis, engine);
  };
  const closers: (() => Promise<void> | void)[] = [];
  try {
    const probe = open();
    await probe.ready();
    const slot = keySlot(probe.layout.tag(0));
    const master = await cluster.nodeForSlot(slot);
    const replica = (await cluster.replicas()).find((r) => r.masterId === master.id);
    if (!replica) throw new Error(`master ${master.port} has no replica`);
    const calls: CallRecord[] = [];
    const traffic = async (n: number) => {
      const until = calls.length + n;
      await eventually(() => calls.length >= until, 30_000, `${n} more calls answered`);
    };
    const target: Target = { cluster, master, replica, slot, traffic };
    const rooms = pickRooms(probe, await cluster.masters(), target);
    const bucketOf = (room: string) => probe.layout.room(room).bucket;

    // Observers first: the log consumer, a subscriber, a replica of every room.
    const handled: Logged[] = [];
    const consumer = new LogConsumer(
      open(),
      (event, { bucket, id }) => void handled.push({ bucket, id, event }),
      { group: "audit", pollMs: 20, claimIdleMs: 1_000 },
    );
    consumer.on("error", () => errors.consumer++);
    consumer.start();
    closers.push(() => consumer.stop());

    const pubsub: PresenceEvent[] = [];
    const subscriber = new Subscriber(open());
    subscriber.on("error", () => errors.subscriber++);
    closers.push(() => subscriber.close());
    for (const room of rooms) await subscriber.subscribe(room, (e) => void pubsub.push(e));

    const watcher = new Subscriber(open());
    watcher.on("error", () => errors.subscriber++);
    closers.push(() => watcher.close());
    const resyncs = { gap: 0, reconnect: 0, log: 0, verify: 0 };
    const watches = new Map<string, RoomWatch>();
    for (const room of rooms) {
      const watch = await watcher.watch(room);
      watch.on("sync", (reason) => reason !== "start" && resyncs[reason]++);
      watches.set(room, watch);
    }

    const sweepers = Array.from({ length: SWEEPERS }, () => {
      const sweeper = new Sweeper(open(), { intervalMs: 200, maxBackoffMs: 1_000 });
      sweeper.on("failed", () => errors.sweeper++);
      sweeper.start();
      return sweeper;
    });
    closers.push(() => Promise.all(sweepers.map((s) => s.stop())).then(() => undefined));

    // A gateway and two clients, in rooms of the faulted bucket and others.
    const gateway = new Gateway(open(), { jwt: { secret: SECRET }, sweeper: false });
    gateway.on("error", () => errors.gateway++);
    closers.push(() => gateway.close());
    const { port } = await gateway.listen(0);
    const url = `ws://127.0.0.1:${port}/presence`;
    const memberships: [string, string[]][] = [
      [GATEWAY_USERS[0]!, [rooms[0]!, rooms[5]!]],
      [GATEWAY_USERS[1]!, [rooms[1]!, rooms[3]!]],
    ];
    const clients: RollcallClient[] = [];
    const joined: [string, Room][] = [];
    let clientResyncs = 0;
    for (const [user, its] of memberships) {
      const client = connect(url, user, { reconnectMs: { first: 50, max: 500 } });
      clients.push(client);
      closers.push(() => client.close());
      for (const room of its) {
        const handle = await client.join(room); // its first snapshot is in
        handle.on("sync", () => clientResyncs++);
        handle.on("error", () => errors.room++);
        joined.push([user, handle]);
      }
    }

    // Writers: random calls on a few users across the rooms, until stopped.
    let made = 0;
    let failed = 0;
    let writing = true;
    const writers = Array.from({ length: WRITERS }, async () => {
      const rc = open();
      const own = rng.fork();
      while (writing) {
        made++;
        try {
          calls.push(await randomCall(rc, own, rooms, USERS));
        } catch {
          failed++;
        }
      }
    });

    await traffic(WARMUP_CALLS);
    const faultStarted = Date.now();
    await inject(target);
    const faultMs = Date.now() - faultStarted;
    await traffic(AFTERMATH_CALLS);
    writing = false;
    await Promise.all(writers);

    // Quiet: the writers' users expire and are swept; only the gateway's stay.
    const gatewayUsersOf = (room: string) =>
      memberships.filter(([, its]) => its.includes(room)).map(([user]) => user);
    await converge(async () => {
      for (const room of rooms) {
        const roster = await probe.roster(room);
        const users = roster.members.map((m) => m.user);
        if (JSON.stringify(users) !== JSON.stringify(gatewayUsersOf(room)) || roster.typing.length)
          return `${room}: ${users.join(",")} typing ${roster.typing.join(",")}`;
        // The counts the scripts keep agree with the roster.
        const counts = await probe.count(room);
        const connections = roster.members.reduce((n, m) => n + m.connections, 0);
        if (counts.users !== roster.count || counts.connections !== connections || counts.typing)
          return `${room}: counts ${JSON.stringify(counts)}, roster ${roster.count}/${connections}`;
      }
      return null;
    }, "expiry of the writers' users");

    // Replicas, the RoomWatch ones and the gateway clients', show what roster() says.
    await converge(async () => {
      for (const [room, watch] of watches) {
        const diff = differs(await probe.roster(room), watch.roster, watch.synced);
        if (diff) return `watch of ${room}: ${diff}`;
      }
      for (const [user, handle] of joined) {
        const diff = differs(await probe.roster(handle.room), handle.roster, handle.synced);
        if (diff) return `${user}'s client in ${handle.room}: ${diff}`;
      }
      return null;
    }, "replicas");

    // The clients go: the gateway leaves their rooms. Then nobody is left anywhere.
    clients.forEach((c) => c.close());
    await converge(async () => {
      for (const room of rooms) {
        const roster = await probe.roster(room);
        if (roster.count > 0) return `${room} has ${roster.count} members`;
      }
      for (const [room, watch] of watches) {
        if (watch.roster.members.length > 0) return `the watch of ${room} still lists members`;
      }
      return null;
    }, "the empty end");
    // With nobody left, every bucket's counts are back to nothing: no change was counted twice
    // or lost, whatever the fault did.
    await converge(async () => {
      for (const b of await probe.stats()) {
        if (b.rooms || b.users || b.connections || b.typing)
          return `bucket ${b.bucket}: ${JSON.stringify(b)}`;
      }
      return null;
    }, "the buckets' counts");

    // Every entry the log holds is handled, and pub/sub delivered each room's last one (the quiet
    // end came after the cluster healed).
    let stored: Logged[] = [];
    await converge(async () => {
      stored = await readLog(probe);
      const ids = new Set(handled.map((l) => `${l.bucket}/${l.id}`));
      const unread = stored.filter((l) => !ids.has(`${l.bucket}/${l.id}`)).length;
      return unread === 0 ? null : `${unread} entries not handled yet`;
    }, "the log consumer");
    await converge(() => {
      const seen = new Set(pubsub.map((e) => `${e.epoch}/${e.room}/${e.seq}`));
      const last = new Map(stored.map(({ event: e }) => [e.room, `${e.epoch}/${e.room}/${e.seq}`]));
      const missing = [...last.values()].filter((key) => !seen.has(key));
      return Promise.resolve(missing.length === 0 ? null : `pub/sub lacks ${missing.join(", ")}`);
    }, "pub/sub");

    for (const close of closers.splice(0).reverse()) await close();
    const result = audit({ handled, stored, pubsub, calls, bucketOf, lossAllowed });
    // The faulted bucket moved to another process: its later events are in another epoch.
    const bucketEpochs = new Set(
      [...handled, ...stored].filter((l) => l.bucket === 0).map((l) => l.event.epoch),
    ).size;
    rows.push({
      fault,
      calls: made,
      failed,
      resolved: calls.length,
      "log events": result.events,
      "pubsub seen": result.pubsubSeen,
      "pubsub missed": result.pubsubMissed,
      "pubsub gaps": result.pubsubGaps,
      epochs: result.epochs,
      "bucket epochs": bucketEpochs,
      duplicates: result.duplicates,
      redelivered: result.redelivered,
      "lost writes": `${result.lostWrites.length} (${result.unlogged} never logged)`,
      "log lost": result.lostFromLog,
      "watch resyncs": `${resyncs.gap} gap, ${resyncs.reconnect} reconnect, ${resyncs.log} log`,
      "client resyncs": clientResyncs,
      "errors reported": Object.values(errors).reduce((a, b) => a + b, 0),
      "fault ms": faultMs,
      "run s": Math.round((Date.now() - started) / 100) / 10,
      violations: result.violations.length,
    });
    expect(result.violations, explain(result.violations)).to.deep.equal([]);
    expect(unhandled.count(), "unhandled rejections").to.equal(0);
    expect(bucketEpochs, "epochs of the faulted bucket").to.be.at.least(2);
    return result;
  } finally {
    unhandled.stop();
    for (const close of closers.splice(0).reverse()) await Promise.resolve(close()).catch(() => 0);
    connections.forEach((c) => c.disconnect());
  }
}

const roleOf = async (cluster: LocalCluster, port: number) =>
  String(((await cluster.admin(port).call("ROLE")) as unknown[])[0]);

describe("faults on a 3-master, 3-replica cluster under traffic", function () {
  this.timeout(90_000);
  let cluster: LocalCluster;

  before(async function () {
    this.timeout(60_000);
    console.log(`  fault suite seed ${SEED} (FAULT_SEED=${SEED} replays the traffic)`);
    cluster = await startCluster(3, { replicas: 1 });
  });

  after(async () => {
    if (rows.length > 0) console.log(`\n${table(rows.map((r) => ({ ...r })))}\n`);
    await cluster?.stop();
  });

  it("CLUSTER FAILOVER: nothing lost from the log, a new epoch on the promoted replica", async () => {
    const result = await scenario(cluster, "FAILOVER", "f1", false, async (t) => {
      await t.cluster.failover(t.replica.port);
      await t.cluster.waitForReplicas();
    });
    expect(result.lostWrites).to.deep.equal([]);
  });

  it("CLUSTER FAILOVER FORCE: lost writes measured, never a number reused", async () => {
    await scenario(cluster, "FAILOVER FORCE", "f2", true, async (t) => {
      await t.cluster.failover(t.replica.port, "FORCE");
      await t.cluster.waitForReplicas();
    });
  });

  it("a master SIGKILLed, then restarted as a replica", async () => {
    await scenario(cluster, "SIGKILL + restart", "f3", true, async (t) => {
      await t.cluster.kill(t.master.port);
      await eventually(
        async () => (await t.cluster.masters()).some((m) => m.port === t.replica.port),
        20_000,
        "the replica to take over",
      );
      await t.cluster.waitForOk();
      await t.traffic(300); // against the new master, the old one still down
      await t.cluster.restart(t.master.port);
      await eventually(
        async () => (await roleOf(t.cluster, t.master.port)) === "slave",
        20_000,
        "the old master to rejoin as a replica",
      );
      await t.cluster.waitForOk();
      await t.cluster.waitForReplicas();
    });
  });

  it("resharding: the faulted bucket's slot migrated while traffic flows", async () => {
    const result = await scenario(cluster, "slot migration", "f4", false, async (t) => {
      const to = (await t.cluster.masters()).find((m) => m.id !== t.master.id)!;
      // A few calls answered against the half-migrated slot after each batch.
      const onBatch = () => t.traffic(4);
      await t.cluster.migrateSlot(t.slot, t.master.port, to.port, { batch: 20, onBatch });
    });
    expect(result.lostWrites).to.deep.equal([]);
  });

  /**
   * The Subscriber of a Cluster loses its sharded subscriber connection to the killed master.
   * Its resubscribe fails while the cluster fails over, and it then disconnects the Cluster to
   * try again: ioredis's subscriber group, stopped in the middle of a reset, never completes
   * another one, so the rooms stay unsubscribed and their replicas stale for good.
   */
  it("RoomWatch replicas follow their rooms again after the rooms' master is SIGKILLed", async () => {
    const writer = new Cluster(cluster.nodes);
    const watching = new Cluster(cluster.nodes);
    for (const c of [writer, watching]) c.on("error", () => undefined);
    const engine = { ...ENGINE, prefix: "f6" };
    const rc = new Rollcall(writer, engine);
    const subscriber = new Subscriber(new Rollcall(watching, engine));
    subscriber.on("error", () => undefined);
    let writing = true;
    let beats = 0;
    let traffic: Promise<void> | undefined;
    let killed: number | undefined;
    try {
      const slot = keySlot(rc.layout.tag(0));
      const master = await cluster.nodeForSlot(slot);
      const replica = (await cluster.replicas()).find((r) => r.masterId === master.id)!;
      const rooms: string[] = [];
      for (let i = 0; rooms.length < 3; i++)
        if (rc.layout.room(`r${i}`).bucket === 0) rooms.push(`r${i}`);
      const watches = await Promise.all(rooms.map((room) => subscriber.watch(room)));
      traffic = (async () => {
        for (let n = 0; writing; n++) {
          const room = rooms[n % rooms.length]!;
          await rc.heartbeat(room, `u${n % 5}`, "c", { state: { n } }).then(
            () => beats++,
            () => undefined,
          );
        }
      })();
      const answered = async (n: number) => {
        const until = beats + n;
        await eventually(() => beats >= until, 20_000, `${n} more heartbeats answered`);
      };
      await answered(25);
      killed = master.port;
      await cluster.kill(master.port);
      await eventually(
        async () => (await cluster.masters()).some((m) => m.port === replica.port),
        20_000,
        "the replica to take over",
      );
      await cluster.waitForOk();
      await answered(50);
      writing = false;
      await traffic;
      await converge(
        async () => {
          for (const [i, watch] of watches.entries()) {
            const diff = differs(await rc.roster(rooms[i]!), watch.roster, watch.synced);
            if (diff) return `watch of ${rooms[i]}: ${diff}`;
          }
          return null;
        },
        "the replicas of the killed master's rooms",
        10_000,
      );
      await Promise.all(watches.map((w) => w.close()));
    } finally {
      writing = false;
      await traffic;
      subscriber.close();
      writer.disconnect();
      watching.disconnect();
      // The killed master comes back as a replica, for the tests after this one.
      if (killed !== undefined) await cluster.restart(killed);
      await cluster.waitForOk();
      await cluster.waitForReplicas();
    }
  });

  /**
   * A forced failover that undoes a write the old master acknowledged, then the old master
   * promoted again. It never restarted, so it has the run_id that owns the bucket's epoch; if no
   * script touched the bucket on the interim master, it goes on with that epoch from the counter
   * it got back, and hands out again the number of the write that was lost.
   */
  it("a master that lost acknowledged writes starts a new epoch when promoted again", async () => {
    const redis = new Cluster(cluster.nodes);
    redis.on("error", () => undefined);
    try {
      const rc = new Rollcall(redis, { ...ENGINE, prefix: "f5", buckets: 1 });
      const slot = keySlot(rc.layout.tag(0));
      await cluster.waitForOk();
      const a = await cluster.nodeForSlot(slot);
      const b = (await cluster.replicas()).find((r) => r.masterId === a.id)!;
      const admin = cluster.admin(a.port);
      const [roomKey] = rc.layout.room("room").keys;
      const seqKey = rc.layout.seq(0);
      await rc.heartbeat("room", "ann", "c");
      expect(await admin.hexists(roomKey, "ann"), "ann's join, on A").to.equal(1);
      expect(await admin.wait(1, 2_000), "replicated").to.equal(1);

      // Cut A's replica off (its link dropped, a new sync refused): a write reaches A alone.
      let lost: HeartbeatResult | undefined;
      await admin.call("ACL", "SETUSER", "default", "-psync", "-sync");
      try {
        await admin.call("CLIENT", "KILL", "TYPE", "replica");
        lost = await rc.heartbeat("room", "bob", "c");
        expect(await admin.hexists(roomKey, "bob"), "bob's join, on A").to.equal(1);
        await cluster.admin(b.port).call("CLUSTER", "FAILOVER", "FORCE");
        const roleIs = (port: number, role: string) => async () =>
          (await roleOf(cluster, port)) === role;
        await eventually(roleIs(b.port, "master"), 20_000, "B to take over");
        await eventually(roleIs(a.port, "slave"), 20_000, "A to follow B");
      } finally {
        await admin.call("ACL", "SETUSER", "default", "+psync", "+sync");
      }
      await cluster.waitForOk();
      await cluster.waitForReplicas();
      // Read raw: roster() would run a script on B (and start B's epoch there).
      expect(await cluster.admin(b.port).hexists(roomKey, "bob"), "bob's join undone").to.equal(0);

      await cluster.failover(a.port);
      await cluster.waitForReplicas();
      const counter = JSON.stringify(await admin.hgetall(seqKey));
      const next = await rc.heartbeat("room", "cid", "c");
      const undone = lost?.event ?? null;
      const [was, is] = [JSON.stringify(undone), JSON.stringify(next.event)];
      expect(undone, "the write A acknowledged").to.not.equal(null);
      expect(
        is,
        `bob's lost join was ${was}, cid's join is ${is} (A's counter: ${counter})`,
      ).to.not.equal(was);
      expect(next.event?.epoch, "the epoch after the loss").to.not.equal(undone?.epoch);
    } finally {
      redis.disconnect();
    }
  });
});
