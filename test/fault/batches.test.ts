import { expect } from "chai";
import {
  REDIS_OPTIONS,
  Rollcall,
  RollcallError,
  type HeartbeatOutcome,
  type PresenceEvent,
} from "../../src/index.js";
import type { Snapshot } from "../../src/protocol/replica.js";
import { Host } from "../../src/runtime/host.js";
import { keySlot, useCluster } from "../kit/cluster.js";
import { IMMEDIATE, caughtUp, client, listen } from "../kit/redis.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

/** Rooms named `<prefix><n>`, one in each of `count` different buckets, by `bucketOf`. */
function roomsInBuckets(
  rollcall: Rollcall,
  count: number,
  accept: (bucket: number) => boolean = () => true,
): string[] {
  const buckets = new Map<number, string>();
  for (let n = 0; buckets.size < count; n++) {
    const room = `room-${n}`;
    const bucket = rollcall.bucketOf(room);
    if (!buckets.has(bucket) && accept(bucket)) buckets.set(bucket, room);
  }
  return [...buckets.values()];
}

/** An outcome, as compared: a result as it is, a failure by its class and code. */
function shown(outcome: HeartbeatOutcome): unknown {
  return outcome.error ? `${outcome.error.name} ${outcome.error.code}` : outcome;
}

/**
 * A heartbeatMany over several buckets, one of whose calls fails for real: the entries of the
 * others are applied and answered, those of the failed call carry its typed error, in the order
 * given, and nothing rejects.
 */
describe("half-done heartbeat batches", () => {
  it("answers every entry: the other buckets' results, the failed bucket's error", async () => {
    const unhandled = watchUnhandled();
    const redis = client();
    const rc = new Rollcall(redis, IMMEDIATE);
    const [a, b, c] = roomsInBuckets(rc, 3) as [string, string, string];
    // A key of the wrong type where b's records live: its bucket's script fails on it.
    await redis.set(rc.layout.room(b).keys[0], "not a hash");
    const events = await listen([a, b, c].map((room) => rc.channel(room)));
    const outcomes = await rc.heartbeatMany([
      { room: a, user: "ann", connection: "c" },
      { room: b, user: "bob", connection: "c" },
      { room: c, user: "cy", connection: "c" },
      { room: a, user: "dan", connection: "c" },
      { room: b, user: "eve", connection: "c" },
    ]);
    await caughtUp(events);
    const joins = new Map(events.map((e) => [e.user, { epoch: e.epoch, seq: e.seq }]));
    expect(events.map((e) => `${e.type} ${e.user}`).sort()).to.deep.equal([
      "join ann",
      "join cy",
      "join dan",
    ]);
    expect(outcomes.map(shown)).to.deep.equal([
      { joined: true, full: false, event: joins.get("ann") },
      "RedisCallError REDIS_ERROR",
      { joined: true, full: false, event: joins.get("cy") },
      { joined: true, full: false, event: joins.get("dan") },
      "RedisCallError REDIS_ERROR",
    ]);
    // One call failed: its entries share its error, which says what Redis refused.
    expect(outcomes[1]!.error).to.equal(outcomes[4]!.error);
    expect(outcomes[1]!.error?.message).to.match(/WRONGTYPE/);
    expect(await rc.count(a)).to.deep.include({ users: 2 });
    expect(await rc.count(c)).to.deep.include({ users: 1 });

    // The bucket mended, a retry of the failed entries joins them.
    await redis.del(rc.layout.room(b).keys[0]);
    const retried = await rc.heartbeatMany([
      { room: b, user: "bob", connection: "c" },
      { room: b, user: "eve", connection: "c" },
    ]);
    expect(retried.map((o) => !o.error && o.joined)).to.deep.equal([true, true]);
    // heartbeat() alone still rejects with its call's error.
    await redis.set(rc.layout.room(b).keys[0], "not a hash");
    const refused = await rc.heartbeat(b, "fay", "c").catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(RollcallError).with.property("code", "REDIS_ERROR");
    // Bad input still rejects the whole batch, before anything is sent.
    const bad = rc.heartbeatMany([
      { room: a, user: "gus", connection: "c" },
      { room: c, user: "", connection: "c" },
    ]);
    expect(await bad.catch((e: unknown) => (e as RollcallError).code)).to.equal("INVALID_ID");
    expect(await rc.count(a)).to.deep.include({ users: 2 });
    unhandled.stop();
    expect(unhandled.count()).to.equal(0);
  });

  it("joins a host's connections whose buckets answered, and fails the others alone", async () => {
    const redis = client();
    const rc = new Rollcall(redis, IMMEDIATE);
    const [a, b, c] = roomsInBuckets(rc, 3) as [string, string, string];
    await redis.set(rc.layout.room(b).keys[0], "not a hash");
    const snapshots: [string, Snapshot][] = [];
    const reports: unknown[] = [];
    const host = new Host<string>(
      rc,
      { events: () => undefined, snapshot: (to, snapshot) => snapshots.push([to, snapshot]) },
      (error) => reports.push(error),
      { sweeper: false },
    );
    try {
      // Joined in one turn: one heartbeatMany for the three of them.
      const joins = await Promise.allSettled(
        [a, b, c].map((room, i) => host.connect(`user-${i}`, `socket-${i}`).join(room)),
      );
      expect(joins.map((j) => j.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled"]);
      const [ok, failed] = joins as [
        PromiseFulfilledResult<{ joined: boolean }>,
        PromiseRejectedResult,
      ];
      expect(ok.value.joined).to.equal(true);
      expect(failed.reason).to.be.instanceOf(RollcallError).with.property("code", "REDIS_ERROR");
      // The joined ones got their rooms' snapshots, and are heartbeated from now on.
      expect(snapshots.map(([to, s]) => [to, s.count])).to.have.deep.members([
        ["socket-0", 1],
        ["socket-2", 1],
      ]);
      expect(host.wheel.size).to.equal(2);
      expect((await rc.count(a)).users + (await rc.count(c)).users).to.equal(2);
      // What the host says to the client of the failed join: the server's failure, reported.
      expect(host.refusal(failed.reason)).to.deep.include({ code: "INTERNAL" });
      expect(reports).to.have.length(1);
    } finally {
      await host.close();
    }
  });
});

/**
 * The master of one bucket's slot SIGSTOPped under a batch: the other masters' buckets answer;
 * that bucket's call times out (REDIS_OPTIONS: commandTimeout) as REDIS_UNAVAILABLE, yet the
 * master runs it once continued. A retry of its entries then answers what that run did (the
 * joins, with their events' seqs) from the replies Redis kept for a resend, and nobody joins
 * twice.
 */
describe("a half-done batch on a cluster, retried", () => {
  const kit = useCluster(3);

  it("answers a retried entry with what its failed call did: joined, and the first seq", async function () {
    this.timeout(60_000);
    const unhandled = watchUnhandled();
    const cluster = kit.cluster();
    // The stopped master's slots stay unserved, and only they: the others keep answering.
    for (const { port } of cluster.nodes) {
      await cluster.admin(port).config("SET", "cluster-require-full-coverage", "no");
    }
    const redis = kit.connect({ redisOptions: REDIS_OPTIONS });
    const rc = new Rollcall(redis, { ...IMMEDIATE, logLength: 1_000 });
    await rc.ready();
    const ownerOf = async (bucket: number) =>
      (await cluster.nodeForSlot(keySlot(rc.layout.tag(bucket)))).port;
    const [stuck] = roomsInBuckets(rc, 1) as [string];
    const stuckPort = await ownerOf(rc.bucketOf(stuck));
    const owners = new Map<number, number>();
    for (let bucket = 0; bucket < rc.settings.buckets; bucket++) {
      owners.set(bucket, await ownerOf(bucket));
    }
    const [a, c] = roomsInBuckets(rc, 2, (bucket) => owners.get(bucket) !== stuckPort) as [
      string,
      string,
    ];
    // Its master has the heartbeat script already: a first EVALSHA that timed out would never
    // fall back to EVAL, and the late run would not happen.
    await rc.heartbeat(stuck, "zed", "c");
    const info = await cluster.admin(stuckPort).info("server");
    const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
    expect(pid).to.be.greaterThan(0);

    process.kill(pid, "SIGSTOP");
    let outcomes: HeartbeatOutcome[];
    try {
      outcomes = await rc.heartbeatMany([
        { room: a, user: "ann", connection: "c" },
        { room: stuck, user: "bob", connection: "c" },
        { room: c, user: "cy", connection: "c" },
        { room: stuck, user: "eve", connection: "c" },
      ]);
    } finally {
      process.kill(pid, "SIGCONT");
    }
    const logged = async (room: string): Promise<PresenceEvent[]> => rc.readLog(room, "0");
    const joinOf = async (room: string, user: string) => {
      const event = (await logged(room)).find((e) => e.type === "join" && e.user === user);
      return event && { epoch: event.epoch, seq: event.seq };
    };
    expect(outcomes.map(shown)).to.deep.equal([
      { joined: true, full: false, event: await joinOf(a, "ann") },
      "RedisCallError REDIS_UNAVAILABLE",
      { joined: true, full: false, event: await joinOf(c, "cy") },
      "RedisCallError REDIS_UNAVAILABLE",
    ]);

    // Continued, the master runs the call it had been sent: bob and eve join, unanswered.
    await eventually(async () => (await rc.count(stuck)).users === 3, 20_000, "the late joins");
    const bob = await joinOf(stuck, "bob");
    const eve = await joinOf(stuck, "eve");
    expect(bob?.seq).to.be.a("number");
    const retried = await rc.heartbeatMany([
      { room: stuck, user: "bob", connection: "c" },
      { room: stuck, user: "eve", connection: "c" },
    ]);
    expect(retried.map(shown)).to.deep.equal([
      { joined: true, full: false, event: bob },
      { joined: true, full: false, event: eve },
    ]);
    // Each joined once; the next beats are plain refreshes.
    expect((await logged(stuck)).map((e) => `${e.type} ${e.user}`)).to.deep.equal([
      "join zed",
      "join bob",
      "join eve",
    ]);
    const again = await rc.heartbeatMany([{ room: stuck, user: "bob", connection: "c" }]);
    expect(again.map(shown)).to.deep.equal([{ joined: false, full: false, event: null }]);
    unhandled.stop();
    expect(unhandled.count()).to.equal(0);
  });
});
