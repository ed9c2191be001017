import { expect } from "chai";
import WebSocket from "ws";
import {
  BEARER_PROTOCOL,
  SUBPROTOCOL,
  SUBPROTOCOL_V2,
  type ClientFrame,
  type GatewayOptions,
  type ServerFrame,
} from "../../src/gateway/index.js";
import { STATUS_LIMIT, type Rollcall, type UserStatus } from "../../src/index.js";
import { USERS_INTERVAL_MS } from "../../src/runtime/userFollow.js";
import { closeGateways, startGateway, token } from "../kit/gateway.js";
import { client } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

/** Nobody expires while a test runs: every transition is one the test makes. */
const ENGINE = {
  presenceWindowMs: 60_000,
  typingWindowMs: 500,
  keyTtlMs: 180_000,
  userStatus: true,
};

type UsersFrame = Extract<ServerFrame, { type: "users" }>;

/** A raw socket of one protocol version: every frame it got, and when. */
class Follower {
  readonly frames: { frame: ServerFrame; at: number }[] = [];
  closed: number | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer) => {
      this.frames.push({
        frame: JSON.parse(data.toString()) as ServerFrame,
        at: performance.now(),
      });
    });
    ws.on("close", (code) => (this.closed = code));
  }

  static async open(
    url: string,
    user: string,
    options: { version?: 1 | 2; claims?: Record<string, unknown> } = {},
  ): Promise<Follower> {
    const protocol = options.version === 1 ? SUBPROTOCOL : SUBPROTOCOL_V2;
    const ws = new WebSocket(url, [
      protocol,
      BEARER_PROTOCOL + (await token(user, options.claims)),
    ]);
    const follower = new Follower(ws);
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    return follower;
  }

  send(frame: ClientFrame | Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  of<T extends ServerFrame["type"]>(type: T): Extract<ServerFrame, { type: T }>[] {
    return this.frames
      .map((f) => f.frame)
      .filter((f): f is Extract<ServerFrame, { type: T }> => f.type === type);
  }

  /** The reply to the request of `ref`. */
  async reply(ref: string): Promise<ServerFrame> {
    await eventually(() => this.frames.some((f) => "ref" in f.frame && f.frame.ref === ref));
    return this.frames.find((f) => "ref" in f.frame && f.frame.ref === ref)!.frame;
  }

  /** The `users` frames after the answer to `ref` (the changes), with their arrival times. */
  changes(ref: string): { frame: UsersFrame; at: number }[] {
    const answer = this.frames.findIndex((f) => f.frame.type === "users" && f.frame.ref === ref);
    return this.frames
      .slice(answer + 1)
      .filter((f): f is { frame: UsersFrame; at: number } => f.frame.type === "users");
  }

  /** The followed users' statuses as the socket sees them: the answer to `ref`, then changes. */
  view(ref: string): Map<string, UserStatus> {
    const answer = this.of("users").find((f) => f.ref === ref);
    const view = new Map(answer?.statuses.map((s) => [s.user, s]));
    for (const { frame } of this.changes(ref)) {
      for (const status of frame.statuses) view.set(status.user, status);
    }
    return view;
  }
}

/** The status of any number of users, STATUS_LIMIT at a time. */
async function readAll(rc: Rollcall, users: readonly string[]): Promise<UserStatus[]> {
  const all: UserStatus[] = [];
  for (let i = 0; i < users.length; i += STATUS_LIMIT) {
    all.push(...(await rc.status(users.slice(i, i + STATUS_LIMIT))));
  }
  return all;
}

/** Every user's status drained from every bucket's stream of changes. */
async function drainAll(rc: Rollcall): Promise<void> {
  await Promise.all(Array.from({ length: rc.settings.buckets }, (_, b) => rc.applyUserChanges(b)));
}

/** Whether the socket sees every user as Redis holds them. */
async function agrees(rc: Rollcall, follower: Follower, ref: string, users: readonly string[]) {
  const view = follower.view(ref);
  const truth = await readAll(rc, users);
  expect(users.map((u) => view.get(u))).to.deep.equal(truth);
  return true;
}

async function gatewayWith(options: Partial<GatewayOptions> = {}) {
  return startGateway({ authorizeUsers: () => true, ...options }, ENGINE);
}

/** Shard channels subscribed in Redis now (the gateway's Subscriber is the only subscriber). */
async function subscribedChannels(): Promise<number> {
  return ((await client().call("PUBSUB", "SHARDCHANNELS")) as string[]).length;
}

const contacts = Array.from({ length: 1_000 }, (_, i) => `contact-${i}`);

describe("gateway: following users' status (protocol version 2)", () => {
  afterEach(closeGateways);

  it("answers 1,000 users' statuses in the order asked, then their transitions batched", async () => {
    const { url, rollcall } = await gatewayWith();
    await rollcall.heartbeatMany(
      contacts.slice(0, 100).map((user) => ({ room: "a", user, connection: "c" })),
    );
    await drainAll(rollcall);
    const ann = await Follower.open(url, "ann");
    // Some 14 KB: past the frame limit (4 KiB), within the follow-users frame's (64 KiB).
    ann.send({ type: "follow-users", users: [...contacts].reverse(), ref: "f" });
    const answer = (await ann.reply("f")) as UsersFrame;
    expect(answer.type).to.equal("users");
    expect(answer.statuses.map((s) => s.user)).to.deep.equal([...contacts].reverse());
    expect(answer.denied).to.equal(undefined);
    expect(answer.statuses.filter((s) => s.online).map((s) => s.user)).to.have.members(
      contacts.slice(0, 100),
    );

    // 200 transitions: 100 users online in one call, then 100 offline, a call each, one by one.
    const started = performance.now();
    await rollcall.heartbeatMany(
      contacts.slice(100, 200).map((user) => ({ room: "b", user, connection: "c" })),
    );
    for (const user of contacts.slice(0, 100)) await rollcall.leave("a", user, "c");
    await eventually(() => agrees(rollcall, ann, "f", contacts), 10_000, "the socket's view");
    const changes = ann.changes("f");
    const lastAt = changes.at(-1)!.at;
    // The gateway sent them all between `started` and their last arrival, 100 ms apart at least.
    expect(changes.length).to.be.at.most(1 + (lastAt - started) / USERS_INTERVAL_MS);
    // Far fewer frames than transitions: the 100 published by one call went out together.
    expect(changes.length).to.be.below(200);
    expect(Math.max(...changes.map((c) => c.frame.statuses.length))).to.be.above(1);
    for (const { frame } of changes) {
      expect(frame.ref).to.equal(undefined);
      const users = frame.statuses.map((s) => s.user);
      expect(new Set(users).size).to.equal(users.length); // each user's last status only
    }
    const changed = new Set(changes.flatMap((c) => c.frame.statuses.map((s) => s.user)));
    expect([...changed]).to.have.members(contacts.slice(0, 200));
  });

  it("loses no transition while its subscriber connection is killed and comes back", async () => {
    const { url, rollcall } = await gatewayWith();
    const admin = client();
    const ann = await Follower.open(url, "ann");
    ann.send({ type: "follow-users", users: contacts, ref: "f" });
    await ann.reply("f");
    for (let round = 0; round < 6; round++) {
      const online = contacts.slice(round * 100, round * 100 + 100);
      await rollcall.heartbeatMany(
        online.map((user) => ({ room: `r${round}`, user, connection: "c" })),
      );
      if (round > 0) {
        const before = contacts.slice((round - 1) * 100, (round - 1) * 100 + 50);
        await Promise.all(before.map((user) => rollcall.leave(`r${round - 1}`, user, "c")));
      }
      // Published while the subscriber is away are lost to it, unless it resyncs.
      if (round === 2) expect(await admin.call("CLIENT", "KILL", "TYPE", "pubsub")).to.equal(1);
    }
    await drainAll(rollcall);
    await eventually(() => agrees(rollcall, ann, "f", contacts), 10_000, "the socket's view");
    expect([...ann.view("f").values()].filter((s) => s.online)).to.have.length(350);
  });

  it("follows only the users authorizeUsers allows, listing the others as denied", async () => {
    const { url, rollcall } = await gatewayWith({
      authorizeUsers: (identity, users) => {
        const allowed = identity.claims?.contacts as string[];
        return users.filter((user) => allowed.includes(user));
      },
    });
    const ann = await Follower.open(url, "ann", { claims: { contacts: ["bob", "cat"] } });
    ann.send({ type: "follow-users", users: ["bob", "dan", "cat", "eve", "bob"], ref: "f" });
    const answer = (await ann.reply("f")) as UsersFrame;
    expect(answer.statuses).to.deep.equal([
      { user: "bob", online: false, since: null, lastSeenAt: null },
      { user: "cat", online: false, since: null, lastSeenAt: null },
    ]);
    expect(answer.denied).to.deep.equal(["dan", "eve"]);
    // Published in this order, on one connection: dan's transition comes before bob's.
    await rollcall.heartbeatMany(
      ["dan", "bob"].map((user) => ({ room: "lobby", user, connection: "c" })),
    );
    await eventually(() => ann.view("f").get("bob")?.online === true);
    const seen = ann.changes("f").flatMap((c) => c.frame.statuses.map((s) => s.user));
    expect(seen).to.deep.equal(["bob"]);
  });

  it("refuses to follow without an authorizeUsers hook, or when it says no", async () => {
    const none = await startGateway({}, ENGINE);
    const refusing = await gatewayWith({ authorizeUsers: () => false });
    for (const url of [none.url, refusing.url]) {
      const ann = await Follower.open(url, "ann");
      ann.send({ type: "follow-users", users: ["bob"], ref: "f" });
      expect(await ann.reply("f")).to.deep.include({ type: "error", code: "FORBIDDEN" });
    }
    const ann = await Follower.open(none.url, "ann");
    ann.send({ type: "follow-users", users: ["bob"], ref: "f" });
    expect(((await ann.reply("f")) as { message: string }).message).to.match(/authorizeUsers/);
    expect(await subscribedChannels()).to.equal(0);
  });

  it("refuses a follow whose hook throws, answers junk or hangs, reports it, and lives on", async () => {
    const { url, gateway } = await gatewayWith({
      authTimeoutMs: 50,
      authorizeUsers: ((_identity: unknown, users: readonly string[]) => {
        if (users[0] === "throw") throw new Error("hook bug");
        if (users[0] === "junk") return "yes";
        if (users[0] === "hang") return new Promise(() => undefined);
        return true;
      }) as GatewayOptions["authorizeUsers"],
    });
    const reported: string[] = [];
    gateway.on("error", (e) => reported.push(e.message));
    const ann = await Follower.open(url, "ann");
    for (const kind of ["throw", "junk", "hang"]) {
      ann.send({ type: "follow-users", users: [kind], ref: kind });
    }
    ann.send({ type: "follow-users", users: ["bob"], ref: "ok" });
    const codes = await Promise.all(
      ["throw", "junk", "hang"].map(
        async (ref) => ((await ann.reply(ref)) as { code: string }).code,
      ),
    );
    expect(codes).to.deep.equal(["INTERNAL", "INTERNAL", "UNAVAILABLE"]);
    expect(await ann.reply("ok")).to.deep.include({ type: "users" });
    expect(reported).to.have.length(3);
    expect(reported[0]).to.equal("hook bug");
    expect(reported[1]).to.match(/authorizeUsers hook returned/);
  });

  it("answers a version 1 socket's follow-users and unfollow-users with UNKNOWN_FRAME", async () => {
    const { url } = await gatewayWith();
    const old = await Follower.open(url, "ann", { version: 1 });
    old.send({ type: "follow-users", users: ["bob"], ref: "f" });
    old.send({ type: "unfollow-users", ref: "u" });
    for (const ref of ["f", "u"]) {
      expect(await old.reply(ref)).to.deep.include({ type: "error", code: "UNKNOWN_FRAME" });
    }
    expect(old.of("users")).to.have.length(0);
  });

  it("refuses bad input, changing nothing", async () => {
    let asked = 0;
    const { url, rollcall } = await gatewayWith({
      authorizeUsers: () => {
        asked += 1;
        return true;
      },
    });
    const ann = await Follower.open(url, "ann");
    ann.send({ type: "follow-users", users: ["bob"], ref: "f" });
    await ann.reply("f");
    const bad: [Record<string, unknown>, string][] = [
      [{ users: "bob" }, "INVALID_OPTION"],
      [{}, "INVALID_OPTION"],
      [{ users: [] }, "INVALID_OPTION"],
      [{ users: contacts.concat("one more") }, "INVALID_OPTION"],
      [{ users: ["cat", "bad\u0000id"] }, "INVALID_ID"],
      [{ users: ["cat", 42] }, "INVALID_ID"],
      [{ users: ["cat", ""] }, "INVALID_ID"],
      [{ users: ["cat"], room: "lobby" }, "BAD_FRAME"],
    ];
    for (const [i, [fields]] of bad.entries()) {
      ann.send({ type: "follow-users", ...fields, ref: `bad-${i}` });
    }
    const extra: Record<string, unknown> = { type: "unfollow-users", users: ["bob"], ref: "bad-u" };
    ann.send(extra);
    const codes = await Promise.all(
      bad.map(async (_, i) => ((await ann.reply(`bad-${i}`)) as { code: string }).code),
    );
    expect(codes).to.deep.equal(bad.map(([, code]) => code));
    expect(await ann.reply("bad-u")).to.deep.include({ code: "BAD_FRAME" });
    expect(asked).to.equal(1);
    // Still following bob.
    await rollcall.heartbeat("lobby", "bob", "c");
    await eventually(() => ann.view("f").get("bob")?.online === true);
  });

  it("closes a follow-users frame past maxFollowFrameBytes with 1009, and takes one within it", async () => {
    const { url } = await gatewayWith({ limits: { maxFollowFrameBytes: 8_192 } });
    const ann = await Follower.open(url, "ann");
    ann.send({ type: "follow-users", users: contacts.slice(0, 400), ref: "f" }); // some 5.6 KB
    expect(((await ann.reply("f")) as UsersFrame).statuses).to.have.length(400);
    ann.send({ type: "follow-users", users: contacts, ref: "g" }); // some 14 KB
    await eventually(() => ann.closed === 1009);
  });

  it("replaces a follow with the next, unsubscribes on unfollow and when the socket closes", async () => {
    const { url, rollcall } = await gatewayWith();
    const ann = await Follower.open(url, "ann");
    ann.send({ type: "follow-users", users: ["bob"], ref: "f1" });
    await ann.reply("f1");
    ann.send({ type: "follow-users", users: ["cat"], ref: "f2" });
    const answer = (await ann.reply("f2")) as UsersFrame;
    expect(answer.statuses.map((s) => s.user)).to.deep.equal(["cat"]);
    await rollcall.heartbeatMany(
      ["bob", "cat"].map((user) => ({ room: "lobby", user, connection: "c" })),
    );
    await eventually(() => ann.view("f2").get("cat")?.online === true);
    expect(ann.changes("f2").flatMap((c) => c.frame.statuses.map((s) => s.user))).to.deep.equal([
      "cat",
    ]);
    expect(await subscribedChannels()).to.equal(1);
    ann.send({ type: "unfollow-users", ref: "u" });
    expect(await ann.reply("u")).to.deep.equal({ type: "ack", ref: "u" });
    await eventually(async () => (await subscribedChannels()) === 0);

    ann.send({ type: "follow-users", users: contacts, ref: "f3" });
    await ann.reply("f3");
    expect(await subscribedChannels()).to.equal(rollcall.settings.buckets);
    ann.ws.terminate();
    await eventually(async () => (await subscribedChannels()) === 0);
  });

  it("ends a follow that a refreshed token no longer allows", async () => {
    const { url } = await gatewayWith({
      authorizeUsers: (identity, users) =>
        users.every((user) => (identity.claims?.contacts as string[]).includes(user)),
    });
    const ann = await Follower.open(url, "ann", { claims: { contacts: ["bob", "cat"] } });
    ann.send({ type: "follow-users", users: ["bob", "cat"], ref: "f" });
    await ann.reply("f");
    ann.send({
      type: "refresh",
      token: await token("ann", { contacts: ["cat", "bob"] }),
      ref: "r1",
    });
    await ann.reply("r1");
    expect(ann.of("error")).to.have.length(0);
    ann.send({ type: "refresh", token: await token("ann", { contacts: ["cat"] }), ref: "r2" });
    expect(await ann.reply("r2")).to.deep.include({ type: "refreshed" });
    expect(ann.of("error").map((e) => [e.code, e.message])).to.deep.equal([
      ["FORBIDDEN", "the new token does not allow following these users: unfollowed"],
    ]);
    await eventually(async () => (await subscribedChannels()) === 0);
  });
});
