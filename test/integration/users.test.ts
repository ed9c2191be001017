import { expect } from "chai";
import {
  Rollcall,
  STATUS_LIMIT,
  Subscriber,
  Sweeper,
  type SubscriberOptions,
  type UserStatus,
} from "../../src/index.js";
import { advanceClock } from "../kit/clock.js";
import { client, listen, redisNow } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

const SHORT = {
  presenceWindowMs: 1_000,
  typingWindowMs: 300,
  keyTtlMs: 5_000,
  leaveGraceMs: 0,
  userStatus: true,
};
const GRACE = { ...SHORT, leaveGraceMs: 500 };

/** The users channel's transitions, as `online:ann` and `offline:ann`. */
async function transitions(rc: Rollcall): Promise<string[]> {
  const channels = Array.from({ length: rc.settings.buckets }, (_, b) => rc.usersChannel(b));
  const sub = client();
  const seen: string[] = [];
  sub.on("smessage", (_channel: string, message: string) => {
    const { type, user } = JSON.parse(message) as { type: string; user: string };
    seen.push(`${type}:${user}`);
  });
  for (const channel of channels) await sub.ssubscribe(channel);
  return seen;
}

async function statusOf(rc: Rollcall, user: string): Promise<UserStatus> {
  return (await rc.status([user]))[0]!;
}

describe("users' status", () => {
  it("is online across two rooms and two instances, and goes offline once when both end", async () => {
    const [a, b] = [new Rollcall(client(), SHORT), new Rollcall(client(), SHORT)];
    const seen = await transitions(a);
    const before = await redisNow(a.redis as never);
    await a.heartbeat("lobby", "ann", "tab-1");
    await b.heartbeat("kitchen", "ann", "tab-2");
    await eventually(async () => (await statusOf(a, "ann")).online);
    const online = await statusOf(b, "ann");
    expect(online.since).to.be.at.least(before);
    expect(online.lastSeenAt).to.equal(null);
    await a.leave("lobby", "ann", "tab-1");
    await a.applyUserChanges(a.bucketOf("lobby"));
    expect((await statusOf(a, "ann")).online).to.equal(true);
    const left = await b.leave("kitchen", "ann", "tab-2");
    expect(left.left).to.equal(true);
    await b.applyUserChanges(b.bucketOf("kitchen"));
    const offline = await statusOf(a, "ann");
    expect(offline).to.deep.include({ online: false, since: null });
    expect(offline.lastSeenAt).to.be.at.least(online.since!);
    await eventually(() => seen.length === 2);
    expect(seen).to.deep.equal(["online:ann", "offline:ann"]);
  });

  it("dates the offline of an expiry to the end of the last connection, within a sweep of it", async () => {
    const rc = new Rollcall(client(), SHORT);
    const lastBeat = await redisNow(rc.redis as never); // at most the heartbeat's time
    await rc.heartbeat("lobby", "bob", "tab");
    await advanceClock(rc.redis, rc, SHORT.presenceWindowMs + 200);
    const sweeper = new Sweeper(rc, { intervalMs: 50 });
    try {
      const pass = await sweeper.sweepOnce();
      expect(pass.leaves).to.equal(1);
    } finally {
      await sweeper.stop();
    }
    // The pass applies its leaves' user changes in the background: done when this resolves.
    await rc.applyUserChanges(rc.bucketOf("lobby"));
    const status = await statusOf(rc, "bob");
    expect(status.online).to.equal(false);
    // Never before the last heartbeat applied; the connection ended a window after it.
    expect(status.lastSeenAt).to.be.at.least(lastBeat + SHORT.presenceWindowMs);
    expect(status.lastSeenAt).to.be.below(lastBeat + SHORT.presenceWindowMs + 1_000);
  });

  it("makes no transition for a reload within the leave grace", async () => {
    const rc = new Rollcall(client(), GRACE);
    const seen = await transitions(rc);
    await rc.heartbeat("lobby", "cyd", "tab-1");
    await rc.leave("lobby", "cyd", "tab-1");
    await rc.heartbeat("lobby", "cyd", "tab-2");
    await advanceClock(rc.redis, rc, GRACE.leaveGraceMs + 100);
    await rc.sweepRoom("lobby");
    await rc.applyUserChanges(rc.bucketOf("lobby"));
    expect((await statusOf(rc, "cyd")).online).to.equal(true);
    await eventually(() => seen.length === 1);
    expect(seen).to.deep.equal(["online:cyd"]);
  });

  it("applies each change once, however many instances drain it, in whatever order", async () => {
    const instances = Array.from({ length: 4 }, () => new Rollcall(client(), SHORT));
    const [rc] = instances as [Rollcall];
    const seen = await transitions(rc);
    const users = Array.from({ length: 20 }, (_, i) => `u${i}`);
    // Rooms of one bucket: their changes are in one stream, applied in its order whoever drains
    // it (changes of two buckets are applied in the order their drains run: see design.md).
    const rooms = Array.from({ length: 100 }, (_, i) => `r${i}`)
      .filter((room) => rc.bucketOf(room) === rc.bucketOf("r0"))
      .slice(0, 3);
    for (const room of rooms) {
      await rc.heartbeatMany(users.map((user) => ({ room, user, connection: "c" })));
      await Promise.all(users.map((user) => rc.leave(room, user, "c")));
    }
    const buckets = Array.from({ length: rc.settings.buckets }, (_, b) => b);
    await Promise.all(instances.flatMap((i) => buckets.map((b) => i.applyUserChanges(b))));
    const statuses = await rc.status(users);
    expect(statuses.every((s) => !s.online && s.lastSeenAt !== null)).to.equal(true);
    await eventually(() => seen.length === 6 * users.length);
    for (const user of users) {
      expect(seen.filter((s) => s.endsWith(`:${user}`))).to.deep.equal([
        `online:${user}`,
        `offline:${user}`,
        `online:${user}`,
        `offline:${user}`,
        `online:${user}`,
        `offline:${user}`,
      ]);
    }
  });

  it("keeps invisible users out of everything others read, and their own calls working", async () => {
    const rc = new Rollcall(client(), SHORT);
    const events = await listen([rc.channel("lobby")]);
    const seen = await transitions(rc);
    await rc.heartbeat("lobby", "eve", "tab", { invisible: true });
    await rc.heartbeat("lobby", "eve", "tab", { invisible: true });
    await rc.heartbeat("lobby", "dan", "tab");
    await rc.applyUserChanges(rc.bucketOf("lobby"));
    expect((await rc.roster("lobby")).members.map((m) => m.user)).to.deep.equal(["dan"]);
    expect((await rc.count("lobby")).users).to.equal(1);
    const stats = await rc.stats();
    expect(stats.reduce((n, s) => n + s.users, 0)).to.equal(1);
    expect(await statusOf(rc, "eve")).to.deep.include({ online: false, lastSeenAt: null });
    expect((await rc.leave("lobby", "eve", "tab")).removed).to.equal(true);
    await eventually(() => events.length === 1 && seen.length === 1);
    expect(events.map((e) => `${e.type}:${e.user}`)).to.deep.equal(["join:dan"]);
    expect(seen).to.deep.equal(["online:dan"]);
  });

  it("shows a user with a visible connection beside an invisible one", async () => {
    const rc = new Rollcall(client(), SHORT);
    await rc.heartbeat("lobby", "fay", "phone", { invisible: true });
    await rc.heartbeat("lobby", "fay", "laptop");
    await rc.applyUserChanges(rc.bucketOf("lobby"));
    expect((await statusOf(rc, "fay")).online).to.equal(true);
    expect((await rc.roster("lobby")).members.map((m) => m.user)).to.deep.equal(["fay"]);
  });

  it("costs a deployment without userStatus nothing: no user change, no status key, reads refused", async () => {
    const rc = new Rollcall(client(), { ...SHORT, userStatus: false });
    await rc.heartbeat("lobby", "ann", "tab");
    await rc.leave("lobby", "ann", "tab");
    expect(await rc.applyUserChanges(rc.bucketOf("lobby"))).to.equal(0);
    const keys = await rc.redis.keys("*");
    expect(keys.filter((k) => /:(ux|p:|q:)/.test(k))).to.deep.equal([]);
    await expectRejected(rc.status(["ann"]), "INVALID_OPTION");
    const subscriber = new Subscriber(rc);
    try {
      await expectRejected(subscriber.watchUsers(["ann"]), "INVALID_OPTION");
    } finally {
      subscriber.close();
    }
    // Every instance agrees on it, either way.
    const on = new Rollcall(client(), SHORT);
    await expectRejected(on.ready(), "SETTINGS_MISMATCH");
  });

  it("refuses an instance without userStatus in a deployment that keeps it", async () => {
    await new Rollcall(client(), SHORT).ready();
    const off = new Rollcall(client(), { ...SHORT, userStatus: false });
    await expectRejected(off.ready(), "SETTINGS_MISMATCH");
  });

  it("refuses bad input, changing nothing", async () => {
    const rc = new Rollcall(client(), SHORT);
    const many = Array.from({ length: 501 }, (_, i) => `u${i}`);
    await expectRejected(rc.status(many), "INVALID_OPTION");
    await expectRejected(rc.status(["ok", "bad\u0000id"]), "INVALID_ID");
    await expectRejected(
      rc.heartbeat("lobby", "ann", "tab", { invisible: "yes" as unknown as boolean }),
      "INVALID_OPTION",
    );
    expect(await rc.redis.dbsize()).to.equal(0);
  });
});

async function expectRejected(promise: Promise<unknown>, code: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    expect((error as { code?: string }).code).to.equal(code);
    return;
  }
  expect.fail(`resolved; expected ${code}`);
}

describe("a live contact list (Subscriber.watchUsers)", () => {
  const subscribers: Subscriber[] = [];
  afterEach(() => subscribers.splice(0).forEach((s) => s.close()));

  function watcher(rollcall: Rollcall, options: SubscriberOptions = {}) {
    const subscriber = new Subscriber(rollcall, options);
    const errors: Error[] = [];
    subscriber.on("error", (e) => errors.push(e));
    subscribers.push(subscriber);
    return { subscriber, errors };
  }

  const contacts = Array.from({ length: 1_000 }, (_, i) => `contact-${i}`);
  /** The online users among `statuses`, sorted. */
  const onlineOf = (statuses: readonly UserStatus[]) =>
    statuses
      .filter((s) => s.online)
      .map((s) => s.user)
      .sort();

  it("starts from a snapshot of 1,000 users and follows their transitions in order", async () => {
    const rc = new Rollcall(client(), SHORT);
    await rc.heartbeatMany(
      contacts.slice(0, 100).map((user) => ({ room: "a", user, connection: "c" })),
    );
    await Promise.all(
      Array.from({ length: rc.settings.buckets }, (_, b) => rc.applyUserChanges(b)),
    );
    const { subscriber, errors } = watcher(rc);
    const watch = await subscriber.watchUsers(contacts);
    expect(watch.synced).to.equal(true);
    expect(onlineOf(watch.statuses)).to.deep.equal(contacts.slice(0, 100).sort());
    const changes: UserStatus[] = [];
    watch.on("change", (s) => changes.push(s));
    await rc.heartbeatMany(
      contacts.slice(100, 150).map((user) => ({ room: "b", user, connection: "c" })),
    );
    await Promise.all(contacts.slice(0, 30).map((user) => rc.leave("a", user, "c")));
    await eventually(() => changes.length === 80);
    expect(
      changes
        .filter((c) => c.online)
        .map((c) => c.user)
        .sort(),
    ).to.deep.equal(contacts.slice(100, 150).sort());
    expect(
      changes
        .filter((c) => !c.online)
        .map((c) => c.user)
        .sort(),
    ).to.deep.equal(contacts.slice(0, 30).sort());
    expect(onlineOf(watch.statuses)).to.deep.equal(onlineOf(await readAll(rc, contacts)));
    expect(watch.status("contact-0")!.lastSeenAt).to.be.a("number");
    expect(errors).to.deep.equal([]);
    await watch.close();
  });

  it("resyncs after its subscriber connection is killed, missing no transition", async () => {
    const rc = new Rollcall(client(), SHORT);
    const admin = client();
    const { subscriber } = watcher(rc);
    const watch = await subscriber.watchUsers(contacts);
    const syncs: string[] = [];
    watch.on("sync", (reason) => syncs.push(reason));
    await rc.heartbeatMany(
      contacts.slice(0, 40).map((user) => ({ room: "a", user, connection: "c" })),
    );
    await eventually(() => watch.statuses.filter((s) => s.online).length === 40);
    expect(await admin.call("CLIENT", "KILL", "TYPE", "pubsub")).to.equal(1);
    // Published while the subscriber is away: lost to it for good, unless it resyncs.
    await Promise.all(contacts.slice(0, 10).map((user) => rc.leave("a", user, "c")));
    await rc.heartbeatMany(
      contacts.slice(40, 60).map((user) => ({ room: "b", user, connection: "c" })),
    );
    await Promise.all(
      Array.from({ length: rc.settings.buckets }, (_, b) => rc.applyUserChanges(b)),
    );
    await eventually(() => watch.synced && syncs.includes("reconnect"));
    await eventually(async () => {
      const truth = onlineOf(await readAll(rc, contacts));
      return JSON.stringify(onlineOf(watch.statuses)) === JSON.stringify(truth);
    });
    expect(onlineOf(watch.statuses)).to.have.length(50);
  });

  it("sees a dropped transition by the gap it leaves, and resyncs its bucket", async () => {
    const rc = new Rollcall(client(), SHORT);
    let dropped = 0;
    const { subscriber, errors } = watcher(rc, {
      relay: (_channel, message, deliver) => {
        if (message.includes('"user":"contact-7"') && dropped === 0) dropped += 1;
        else deliver(message);
      },
    });
    const watch = await subscriber.watchUsers(contacts);
    const syncs: string[] = [];
    watch.on("sync", (reason) => syncs.push(reason));
    await rc.heartbeat("a", "contact-7", "c");
    await rc.applyUserChanges(rc.bucketOf("a"));
    // The next transition of contact-7's bucket shows the gap.
    const sameBucket = contacts.find(
      (u) => u !== "contact-7" && rc.userBucket(u) === rc.userBucket("contact-7"),
    )!;
    await rc.heartbeat("a", sameBucket, "c");
    await eventually(() => watch.status("contact-7")!.online && watch.status(sameBucket)!.online);
    expect(dropped).to.equal(1);
    expect(syncs).to.include("gap");
    expect(errors).to.deep.equal([]);
  });

  it("refuses bad input", async () => {
    const rc = new Rollcall(client(), SHORT);
    const { subscriber } = watcher(rc);
    const many = Array.from({ length: 1_001 }, (_, i) => `u${i}`);
    await expectRejected(subscriber.watchUsers(many), "INVALID_OPTION");
    await expectRejected(subscriber.watchUsers([]), "INVALID_OPTION");
    await expectRejected(subscriber.watchUsers(["bad\u0001"]), "INVALID_ID");
  });
});

/** The status of any number of users, STATUS_LIMIT at a time. */
async function readAll(rc: Rollcall, users: readonly string[]): Promise<UserStatus[]> {
  const all: UserStatus[] = [];
  for (let i = 0; i < users.length; i += STATUS_LIMIT) {
    all.push(...(await rc.status(users.slice(i, i + STATUS_LIMIT))));
  }
  return all;
}
