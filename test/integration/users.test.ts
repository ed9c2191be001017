import { expect } from "chai";
import { Rollcall, Sweeper, type UserStatus } from "../../src/index.js";
import { advanceClock } from "../kit/clock.js";
import { client, listen, redisNow } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

const SHORT = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 5_000, leaveGraceMs: 0 };
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
      expect(pass.statusChanges).to.be.at.least(1);
    } finally {
      await sweeper.stop();
    }
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
    for (let round = 0; round < 3; round++) {
      await rc.heartbeatMany(users.map((user) => ({ room: `r${round}`, user, connection: "c" })));
      await Promise.all(users.map((user) => rc.leave(`r${round}`, user, "c")));
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
