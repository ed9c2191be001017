import { expect } from "chai";
import {
  RedisCallError,
  Rollcall,
  type Roster,
  Subscriber,
  type SubscriberOptions,
  type RosterChange,
  type RoomWatch,
  type SyncReason,
} from "../../src/index.js";
import { parseEvent, type PresenceEvent } from "../../src/protocol/events.js";
import { compareIds } from "../../src/protocol/ids.js";
import type { Snapshot } from "../../src/protocol/replica.js";
import type { RollcallOptions } from "../../src/engine/settings.js";
import { useCluster } from "../kit/cluster.js";
import { advanceClock } from "../kit/clock.js";
import { IMMEDIATE, client } from "../kit/redis.js";
import { Random } from "../kit/random.js";
import { asReplica } from "../kit/rosters.js";
import { eventually } from "../kit/wait.js";

const opened = new Set<Subscriber>();

/** An instance that watches: its own client and subscriber, errors collected, closed after the test. */
function watcher(options: SubscriberOptions = {}, rollcall = new Rollcall(client(), IMMEDIATE)) {
  const subscriber = new Subscriber(rollcall, options);
  const errors: Error[] = [];
  subscriber.on("error", (e) => errors.push(e));
  opened.add(subscriber);
  return { subscriber, errors };
}

/** A watch whose changes and syncs are recorded. */
async function watched(subscriber: Subscriber, room: string) {
  const watch = await subscriber.watch(room);
  const changes: RosterChange[] = [];
  const syncs: SyncReason[] = [];
  watch.on("change", (c) => changes.push(c));
  watch.on("sync", (r) => syncs.push(r));
  return { watch, changes, syncs };
}

/** A relay that holds back or drops the messages `pick` chooses. */
function relayPicking(pick: (e: PresenceEvent) => "drop" | "hold" | "deliver") {
  const held: (() => void)[] = [];
  const relay: SubscriberOptions["relay"] = (_channel, message, deliver) => {
    let choice: "drop" | "hold" | "deliver" = "deliver";
    try {
      choice = pick(parseEvent(message));
    } catch {
      // not an event: let the subscriber report it
    }
    if (choice === "hold") held.push(() => deliver(message));
    else if (choice === "deliver") deliver(message);
  };
  return { relay, release: () => held.splice(0).forEach((deliver) => deliver()) };
}

/**
 * What a replica can know of a roster: every field events carry. The seq of an empty room is the
 * bucket's counter, which moves with other rooms' events, so it is compared for occupied rooms only.
 */
function knowable(r: Snapshot) {
  const { room, count, members, typing } = asReplica(r);
  return { room, seq: r.count === 0 ? "empty" : r.seq, count, members, typing };
}

/** Once quiet, waits for every replica to equal roster(), then asserts it (with a diff if not). */
async function expectConverged(rollcall: Rollcall, watches: RoomWatch[], context = "") {
  const rosters: Roster[] = await Promise.all(watches.map((w) => rollcall.roster(w.room)));
  const want = rosters.map(knowable);
  const converged = () => {
    expect(
      watches.map((w) => knowable(w.roster)),
      context,
    ).to.deep.equal(want);
    expect(
      watches.filter((w) => !w.synced).map((w) => w.room),
      context,
    ).to.deep.equal([]);
    return true;
  };
  await eventually(converged, 5_000, "the replicas to converge");
}

const summary = (changes: RosterChange[]) =>
  changes.map((c) => `${c.type} ${c.user}${c.event ? "" : " (resync)"}`);

describe("RoomWatch", () => {
  afterEach(() => {
    for (const subscriber of opened) subscriber.close();
    opened.clear();
  });

  it("sees a join made through another instance", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber, errors } = watcher();
    const { watch, changes } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1", { state: { status: "here" } });
    await eventually(() => changes.length === 1);
    expect(summary(changes)).to.deep.equal(["join ann"]);
    expect(watch.roster.members).to.deep.equal([
      { user: "ann", joinedAt: changes[0]!.event!.at, state: { status: "here" } },
    ]);
    await expectConverged(other, [watch]);
    expect(errors).to.deep.equal([]);
  });

  it("starts from a snapshot of a room that is already busy", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    await other.heartbeat("room", "bob", "c1", { state: { n: 1 } });
    await other.heartbeat("room", "ann", "c1");
    await other.heartbeat("room", "ann", "c2");
    await other.startTyping("room", "bob");
    const { subscriber } = watcher();
    const { watch, syncs } = await watched(subscriber, "room");

    expect(watch.synced).to.equal(true);
    expect(knowable(watch.roster)).to.deep.equal(knowable(await other.roster("room")));
    expect(watch.roster.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
    expect(watch.roster.typing).to.deep.equal(["bob"]);
    expect(syncs).to.deep.equal([]);
  });

  it("orders members like roster() does: by the bytes of their ids", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = watcher();
    const { watch, changes } = await watched(subscriber, "room");
    // UTF-16 order puts the emoji (a surrogate pair) before the fullwidth A; UTF-8 bytes do not.
    for (const user of ["\u{1f600}", "\uff21", "b"]) {
      await other.heartbeat("room", user, "c1");
      await other.startTyping("room", user);
    }
    await eventually(() => changes.length === 6);
    expect(watch.roster.members.map((m) => m.user)).to.deep.equal(["b", "\uff21", "\u{1f600}"]);
    await expectConverged(other, [watch]);
  });

  it("reports each change, in order, and follows roster() through all of them", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = watcher();
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await other.heartbeat("room", "bob", "c1");
    await other.startTyping("room", "ann");
    await other.setState("room", "ann", { status: "away" });
    await other.startTyping("room", "bob");
    await other.stopTyping("room", "bob");
    await other.leave("room", "ann", "c1");
    await eventually(() => changes.length === 8);
    expect(summary(changes)).to.deep.equal([
      "join ann",
      "join bob",
      "typing-start ann",
      "update ann",
      "typing-start bob",
      "typing-stop bob",
      "typing-stop ann",
      "leave ann",
    ]);
    const chained = changes.every(
      (c, i) => i === 0 || c.event!.prev === changes[i - 1]!.event!.seq,
    );
    expect(chained).to.equal(true);
    expect(syncs).to.deep.equal([]);
    await expectConverged(other, [watch]);
  });

  it("applies events of a room that emptied and filled again without resyncing", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = watcher();
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await other.leave("room", "ann", "c1");
    await other.heartbeat("room", "bob", "c1");
    await other.heartbeat("room", "ann", "c1");
    await eventually(() => changes.length === 4);
    expect(changes.map((c) => c.event!.prev)).to.include(0, "a refill starts a new chain");
    expect(syncs).to.deep.equal([]);
    await expectConverged(other, [watch]);
  });

  it("applies the events that arrive while the first snapshot is taken, after it", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const seen: PresenceEvent[] = [];
    let racing = true;
    // Events published after the subscription but before the snapshot (covered by it) and after
    // the snapshot (to apply), all delivered before the snapshot is installed.
    class Racing extends Rollcall {
      override async roster(room: string): Promise<Roster> {
        if (!racing) return super.roster(room);
        racing = false;
        await other.heartbeat(room, "early", "c1");
        const snapshot = await super.roster(room);
        await other.heartbeat(room, "late", "c1");
        await other.startTyping(room, "late");
        await eventually(() => seen.length === 3);
        return snapshot;
      }
    }
    const { subscriber } = watcher({}, new Racing(client(), IMMEDIATE));
    await subscriber.subscribe("room", (e) => seen.push(e));
    const { watch, syncs } = await watched(subscriber, "room");

    expect(watch.roster.members.map((m) => m.user)).to.deep.equal(["early", "late"]);
    expect(watch.roster.typing).to.deep.equal(["late"]);
    expect(syncs).to.deep.equal([]);
    await expectConverged(other, [watch]);
  });

  for (const [size, limit] of [
    [150, 40],
    [700, 150],
  ] as const) {
    it(`follows a room of ${size} read in pages of ${limit} while members come and go between pages`, async () => {
      const options = { ...IMMEDIATE, rosterLimit: limit };
      const other = new Rollcall(client(), options);
      const users = Array.from({ length: size }, (_, i) => `u${i}`);
      await other.heartbeatMany(users.map((user) => ({ room: "big", user, connection: "c" })));
      let page = 0;
      // Between the pages of the first read: a leave, a join, a typist, an update.
      class Churning extends Rollcall {
        override async roster(room: string, o?: { cursor?: string }): Promise<Roster> {
          const result = await super.roster(room, o);
          const i = page++;
          await other.leave(room, users[i]!, "c");
          await other.heartbeat(room, `new${i}`, "c");
          await other.startTyping(room, users[size - 1 - i]!);
          await other.setState(room, users[size - 2 - i]!, { s: i });
          return result;
        }
      }
      const { subscriber } = watcher({}, new Churning(client(), options));
      const { watch } = await watched(subscriber, "big");
      expect(page, "pages read").to.be.greaterThan(2);
      page = Number.NaN; // no more churn: reads from now on are quiet
      const pages = await other.rosterPages("big");
      expect(new Set(pages.map((p) => p.seq)).size, "a quiet read").to.equal(1);
      const whole = pages.flatMap((p) => p.members.map((m) => m.user));
      await eventually(() => {
        expect(watch.roster.members.map((m) => m.user)).to.deep.equal(
          [...new Set(whole)].sort(compareIds),
        );
        expect(watch.roster.count).to.equal(pages[0]!.count);
        expect(watch.synced).to.equal(true);
        return true;
      });
      expect(watch.roster.typing).to.have.length.greaterThan(2);
    });
  }

  it("resyncs after its subscriber connection is killed while events flow, and converges", async () => {
    const writer = new Rollcall(client(), IMMEDIATE);
    const admin = client();
    const { subscriber } = watcher();
    const rooms = ["r0", "r1", "r2"];
    const watches = await Promise.all(rooms.map((room) => watched(subscriber, room)));

    let flowing = true;
    let made = 0;
    const flowed = async (calls: number) => {
      const until = made + calls;
      await eventually(() => made >= until);
    };
    const flow = (async () => {
      for (let i = 0; flowing; i++) {
        const room = rooms[i % rooms.length]!;
        const user = `u${i % 7}`;
        if (i % 5 === 4) await writer.leave(room, user, "c1");
        else await writer.heartbeat(room, user, "c1", { state: { i } });
        made += 1;
      }
    })();
    await flowed(30);
    expect(await admin.call("CLIENT", "KILL", "TYPE", "pubsub")).to.equal(1);
    // Published right after the kill: lost to the watcher for good, unless it resyncs.
    for (const room of rooms) {
      await writer.heartbeat(room, "late", "c1");
      await writer.startTyping(room, "late");
    }
    await flowed(30);
    flowing = false;
    await flow;

    await expectConverged(
      writer,
      watches.map((w) => w.watch),
    );
    for (const { syncs } of watches) expect(syncs).to.include("reconnect");
    for (const { watch } of watches) expect(watch.roster.typing).to.include("late");
  });

  it("detects a dropped event by the gap it leaves, resyncs and reports what it missed", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { relay } = relayPicking((e) =>
      e.type === "join" && e.user === "bob" ? "drop" : "deliver",
    );
    const { subscriber } = watcher({ relay });
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await other.heartbeat("room", "bob", "c1");
    await other.startTyping("room", "ann");
    await eventually(() => syncs.length === 1);
    expect(syncs).to.deep.equal(["gap"]);
    expect(summary(changes)).to.deep.equal([
      "join ann",
      "typing-start ann (resync)",
      "join bob (resync)",
    ]);
    await expectConverged(other, [watch]);
  });

  it("closes a gap from the event log when it is on, without a snapshot", async () => {
    const options = { logLength: 1_000 };
    const other = new Rollcall(client(), { ...IMMEDIATE, ...options });
    const { relay } = relayPicking((e) =>
      e.type === "join" && e.user === "bob" ? "drop" : "deliver",
    );
    const { subscriber } = watcher({ relay }, new Rollcall(client(), { ...IMMEDIATE, ...options }));
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await other.heartbeat("room", "bob", "c1");
    await other.startTyping("room", "ann");
    await eventually(() => syncs.length === 1);
    expect(syncs).to.deep.equal(["log"]);
    // Every change came from an event (none from a snapshot's difference), bob's from the log.
    expect(summary(changes)).to.deep.equal(["join ann", "join bob", "typing-start ann"]);
    await expectConverged(other, [watch]);
  });

  it("detects reordered events, resyncs and converges", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    // bob's join is held back until after his leave: applied blindly, bob would stay forever.
    const { relay, release } = relayPicking((e) =>
      e.type === "join" && e.user === "bob" ? "hold" : "deliver",
    );
    const { subscriber } = watcher({ relay });
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await other.heartbeat("room", "bob", "c1");
    await other.leave("room", "bob", "c1");
    await eventually(() => syncs.length === 1);
    release();
    expect(syncs).to.deep.equal(["gap"]);
    await expectConverged(other, [watch]);
    expect(watch.roster.members.map((m) => m.user)).to.deep.equal(["ann"]);
    expect(summary(changes)).to.deep.equal(["join ann"]);
  });

  it("ignores an event delivered twice", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = watcher({
      relay: (_channel, message, deliver) => {
        deliver(message);
        deliver(message);
      },
    });
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await other.startTyping("room", "ann");
    await other.leave("room", "ann", "c1");
    // A last join marks the end: events arrive in order, so every other one came before it.
    await other.heartbeat("room", "zed", "c1");
    await eventually(() => changes.some((c) => c.user === "zed"));
    expect(summary(changes)).to.deep.equal([
      "join ann",
      "typing-start ann",
      "typing-stop ann",
      "leave ann",
      "join zed",
    ]);
    expect(syncs).to.deep.equal([]);
    await expectConverged(other, [watch]);
  });

  it("reports a malformed message on the room's channel, skips it and keeps working", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber, errors } = watcher();
    const { watch, changes, syncs } = await watched(subscriber, "room");

    await other.heartbeat("room", "ann", "c1");
    await client().spublish(other.channel("room"), '{"v":1,"type":"join","room":"room"');
    await other.heartbeat("room", "bob", "c1");
    await eventually(() => changes.length === 2);
    expect(errors).to.have.length(1);
    expect(errors[0]!.message).to.contain("Unexpected message on the channel of room");
    expect(syncs).to.deep.equal([]);
    await expectConverged(other, [watch]);
  });

  it("reports a snapshot that fails during a resync and retries until it converges", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    let failures = 0;
    class Flaky extends Rollcall {
      override async roster(room: string): Promise<Roster> {
        if (failures > 0) {
          failures -= 1;
          throw new RedisCallError("roster", new Error("connection reset"));
        }
        return super.roster(room);
      }
    }
    const { relay } = relayPicking((e) => (e.user === "bob" ? "drop" : "deliver"));
    const { subscriber, errors } = watcher({ relay }, new Flaky(client(), IMMEDIATE));
    const { watch, syncs } = await watched(subscriber, "room");

    failures = 2;
    await other.heartbeat("room", "bob", "c1");
    await other.heartbeat("room", "ann", "c1");
    await eventually(() => syncs.length === 1);
    expect(syncs).to.deep.equal(["gap"]);
    expect(errors.map((e) => e.message)).to.deep.equal([
      "rollcall roster failed: connection reset",
      "rollcall roster failed: connection reset",
    ]);
    await expectConverged(other, [watch]);
  });

  it("fails to open when the first snapshot fails, and unsubscribes", async () => {
    class Down extends Rollcall {
      override roster(): Promise<Roster> {
        return Promise.reject(new RedisCallError("roster", new Error("down")));
      }
    }
    const rc = new Down(client(), IMMEDIATE);
    const { subscriber } = watcher({}, rc);
    const failure = await subscriber.watch("room").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).to.be.instanceOf(RedisCallError);
    const [, count] = (await client().call("PUBSUB", "SHARDNUMSUB", rc.channel("room"))) as [
      string,
      number,
    ];
    expect(count).to.equal(0);
  });

  it("unsubscribes a room when its last watch closes", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = watcher();
    const channel = other.channel("room");
    const subscribers = async () =>
      ((await client().call("PUBSUB", "SHARDNUMSUB", channel)) as [string, number])[1];
    const first = await watched(subscriber, "room");
    const second = await watched(subscriber, "room");
    expect(await subscribers()).to.equal(1);

    await first.watch.close();
    expect(first.watch.synced).to.equal(false);
    await other.heartbeat("room", "ann", "c1");
    await eventually(() => second.changes.length === 1);
    expect(first.changes).to.deep.equal([]);
    expect(await subscribers()).to.equal(1);

    await second.watch.close();
    expect(await subscribers()).to.equal(0);
  });

  it("closes with its subscriber", async () => {
    const other = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = watcher();
    const { watch, changes } = await watched(subscriber, "room");
    expect(watch.synced).to.equal(true);

    const subscribers = async () =>
      (
        (await client().call("PUBSUB", "SHARDNUMSUB", other.channel("room"))) as [string, number]
      )[1];
    subscriber.close();
    expect(watch.synced).to.equal(false);
    await eventually(async () => (await subscribers()) === 0);
    await other.heartbeat("room", "ann", "c1");
    expect(await subscribers(), "nobody to deliver the join to").to.equal(0);
    expect(changes).to.deep.equal([]);
    await watch.close();
  });

  it("keeps 100 replicas equal to roster() through random traffic from several instances, with and without message loss", async function () {
    this.timeout(30_000);
    const seed = Number(process.env.ROLLCALL_SEED ?? Date.now());
    const rng = new Random(seed);
    const random = () => rng.next();
    const pick = <T>(items: readonly T[]): T => rng.pick(items);
    const options: RollcallOptions = {
      presenceWindowMs: 1_000,
      typingWindowMs: 300,
      keyTtlMs: 3_000,
    };
    const rooms = Array.from({ length: 100 }, (_, i) => `room-${i}`);
    const users = ["ann", "bob", "cy", "émile", "\uff21", "\u{1f600}"];
    const connections = ["c1", "c2"];
    const instances = Array.from(
      { length: 3 },
      () => new Rollcall(client(), { ...IMMEDIATE, ...options }),
    );

    const faithful = watcher({}, new Rollcall(client(), { ...IMMEDIATE, ...options }));
    // A lossy transport: drops some messages, delays others behind the next one. A replica can
    // only notice a loss by the next event of the room, so the run ends with one lossless event each.
    let lossless = false;
    const held: (() => void)[] = [];
    const lossy = watcher(
      {
        relay: (_channel, message, deliver) => {
          const roll = lossless ? 1 : random();
          if (roll < 0.02) return;
          if (roll < 0.04) return void held.push(() => deliver(message));
          deliver(message);
          held.splice(0).forEach((late) => late());
        },
      },
      new Rollcall(client(), { ...IMMEDIATE, ...options }),
    );
    const watches = async (subscriber: Subscriber) =>
      Promise.all(rooms.map((room) => watched(subscriber, room)));
    const [exact, lossyWatches] = await Promise.all([
      watches(faithful.subscriber),
      watches(lossy.subscriber),
    ]);

    const tally = new Map<string, number>();
    const step = async (rc: Rollcall) => {
      const room = pick(rooms);
      const user = pick(users);
      const roll = random();
      const op =
        roll < 0.4
          ? "heartbeat"
          : roll < 0.55
            ? "leave"
            : roll < 0.7
              ? "startTyping"
              : roll < 0.8
                ? "stopTyping"
                : roll < 0.9
                  ? "setState"
                  : "sweepRoom";
      tally.set(op, (tally.get(op) ?? 0) + 1);
      const state = { mood: pick(["calm", "busy", "away"]) };
      if (op === "heartbeat") {
        await rc.heartbeat(room, user, pick(connections), random() < 0.3 ? { state } : {});
      } else if (op === "leave") await rc.leave(room, user, pick(connections));
      else if (op === "startTyping") await rc.startTyping(room, user);
      else if (op === "stopTyping") await rc.stopTyping(room, user);
      else if (op === "setState") await rc.setState(room, user, state);
      else await rc.sweepRoom(room);
    };
    await Promise.all(
      instances.flatMap((rc) =>
        Array.from({ length: 4 }, async () => {
          for (let i = 0; i < 1_500; i++) {
            await step(rc);
            // Time jumps now and then, so that users go silent long enough to be swept as expired.
            if (random() < 0.01) await advanceClock(rc.redis, rc, rng.int(1, 60));
          }
        }),
      ),
    );

    // Everyone goes silent and is swept out: expiries at scale, concurrently from every instance.
    await advanceClock(instances[0]!.redis, instances[0]!, 1_100);
    await Promise.all(rooms.map((room, i) => instances[i % instances.length]!.sweepRoom(room)));
    lossless = true;
    for (const room of rooms) await instances[0]!.heartbeat(room, "last", "c1");

    const context = `seed ${seed}, operations ${JSON.stringify(Object.fromEntries(tally))}`;
    await expectConverged(
      instances[0]!,
      exact.map((w) => w.watch),
      `faithful, ${context}`,
    );
    await expectConverged(
      instances[0]!,
      lossyWatches.map((w) => w.watch),
      `lossy, ${context}`,
    );

    const rosters = exact.map((w) => w.watch.roster);
    expect(rosters.map((r) => r.members.map((m) => m.user))).to.deep.equal(
      rooms.map(() => ["last"]),
    );
    const all = exact.flatMap((w) => w.changes);
    const expiredLeaves = all.filter(
      (c) => c.event?.type === "leave" && c.event.reason === "expired",
    );
    expect(expiredLeaves.length, context).to.be.greaterThan(0);
    expect(
      exact.flatMap((w) => w.syncs),
      `faithful ${context}`,
    ).not.to.include("gap");
    expect(
      lossyWatches.flatMap((w) => w.syncs).filter((r) => r === "gap").length,
    ).to.be.greaterThan(0);
    expect(faithful.errors).to.deep.equal([]);
    expect(lossy.errors).to.deep.equal([]);
  });
});

describe("RoomWatch on Redis Cluster", () => {
  const options: RollcallOptions = {
    presenceWindowMs: 1_000,
    typingWindowMs: 300,
    keyTtlMs: 3_000,
  };
  const { connect, admins: nodeAdmins } = useCluster(3);

  it("follows rooms on every shard, and resyncs after every sharded subscriber is killed", async () => {
    const writer = new Rollcall(connect(), { ...IMMEDIATE, ...options });
    const subscriber = new Subscriber(new Rollcall(connect(), { ...IMMEDIATE, ...options }));
    const errors: Error[] = [];
    subscriber.on("error", (e) => errors.push(e));
    try {
      const rooms = Array.from({ length: 24 }, (_, i) => `room${i}`);
      const watches = await Promise.all(rooms.map((room) => watched(subscriber, room)));
      for (const room of rooms) {
        await writer.heartbeat(room, "ann", "c1", { state: { s: 1 } });
        await writer.startTyping(room, "ann");
      }
      await expectConverged(
        writer,
        watches.map((w) => w.watch),
        "before the kill",
      );

      for (const admin of nodeAdmins()) {
        expect(await admin.call("CLIENT", "KILL", "TYPE", "pubsub")).to.equal(1);
      }
      // Published right after the kill: lost to the watcher for good, unless it resyncs.
      for (const room of rooms) {
        await writer.heartbeat(room, "bob", "c1");
        await writer.setState(room, "ann", { s: 2 });
      }
      await expectConverged(
        writer,
        watches.map((w) => w.watch),
        "after the kill",
      );
      for (const { syncs } of watches) expect(syncs).to.include("reconnect");

      for (const room of rooms) await writer.leave(room, "ann", "c1");
      await expectConverged(
        writer,
        watches.map((w) => w.watch),
        "after the leaves",
      );
      expect(watches.map((w) => w.watch.roster.members.map((m) => m.user))).to.deep.equal(
        rooms.map(() => ["bob"]),
      );
    } finally {
      subscriber.close();
    }
    expect(errors).to.deep.equal([]);
  });
});
