// The integrations' `event` reports the leave of a user whose last connection on the instance
// left the room: the instance keeps the room's channel subscribed until that leave (published
// when the leave grace ends, by a sweeper) has come, or the grace and a margin have passed.
// Through the real libraries: a Socket.IO server and socket.io-client sockets, a Hocuspocus
// server and providers.
import { expect } from "chai";
import type { HocuspocusProvider } from "@hocuspocus/provider";
import type { Redis } from "ioredis";
import type { Rollcall } from "../../src/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { LEAVE_MARGIN_MS } from "../../src/runtime/room.js";
import { advanceClock, stopClock } from "../kit/clock.js";
import { ENGINE, provider, startInstance, type Instance } from "../kit/hocuspocus.js";
import { client, redisNow, redisUrl } from "../kit/redis.js";
import { RECOMMENDED, connectIo, startIo, type IoClient } from "../kit/socketio.js";
import { eventually } from "../kit/wait.js";

/** How many connections subscribe the room's channel (each instance's Subscriber: one). */
async function subscribers(redis: Redis, rollcall: Rollcall, room: string): Promise<number> {
  const [, n] = (await redis.call("PUBSUB", "SHARDNUMSUB", rollcall.channel(room))) as [
    string,
    number,
  ];
  return n;
}

/** Moves the test clock past the leave grace of whoever left, and sweeps the room. */
async function graceEnds(rollcall: Rollcall, room: string, graceMs: number): Promise<void> {
  await eventually(async () => {
    const { members } = await rollcall.roster(room);
    return members.some((m) => m.leavingAt !== null);
  });
  await advanceClock(client(), rollcall, graceMs + 1);
  await rollcall.sweepRoom(room);
}

/** The joins and leaves of a room among events, as `type:user` lines. */
const lines = (events: { event: PresenceEvent }[], room: string) =>
  events
    .filter(({ event }) => event.room === room && (event.type === "join" || event.type === "leave"))
    .map(({ event }) => `${event.type}:${event.user}`);

describe("rollcall/socket.io: the leave of a room's last socket here", function () {
  this.timeout(30_000);
  /** What the test started, closed after it: sockets first, then the instances. */
  const started: (() => unknown)[] = [];
  afterEach(async () => {
    for (const close of started.splice(0).reverse()) await close();
  });

  async function instance(engine = {}) {
    const io = await startIo({ redisUrl: redisUrl(), engine });
    started.push(() => io.close());
    const events: { event: PresenceEvent; room: string }[] = [];
    io.presence.on("event", (event, room) => events.push({ event, room }));
    return { ...io, events };
  }

  function user(at: { url: string }, name: string): IoClient {
    const c = connectIo(at.url, name);
    started.push(() => c.socket.disconnect());
    return c;
  }

  it("reports it on `event` when the grace ends, then unsubscribes the room", async () => {
    const a = await instance();
    const admin = client();
    const ann = user(a, "ann");
    await ann.join("doc");
    await eventually(() => lines(a.events, "doc").includes("join:ann"));
    expect(await subscribers(admin, a.rollcall, "doc")).to.equal(1);
    ann.socket.disconnect();
    await graceEnds(a.rollcall, "doc", RECOMMENDED.leaveGraceMs);
    await eventually(() => lines(a.events, "doc").includes("leave:ann"), 5_000, "ann's leave");
    expect(lines(a.events, "doc")).to.deep.equal(["join:ann", "leave:ann"]);
    expect(a.events.every(({ room }) => room === "doc")).to.equal(true);
    await eventually(async () => (await subscribers(admin, a.rollcall, "doc")) === 0);

    // The same when the last socket leaves the room and stays connected.
    const bob = user(a, "bob");
    await bob.join("doc");
    await eventually(() => lines(a.events, "doc").includes("join:bob"));
    await bob.leave("doc");
    await graceEnds(a.rollcall, "doc", RECOMMENDED.leaveGraceMs);
    await eventually(() => lines(a.events, "doc").includes("leave:bob"), 5_000, "bob's leave");
    await eventually(async () => (await subscribers(admin, a.rollcall, "doc")) === 0);
    expect(a.errors).to.deep.equal([]);
  });

  it("waits for no leave when the user is still connected elsewhere, and reports a listener that throws", async () => {
    const [a, b] = [await instance(), await instance()];
    const admin = client();
    const here = user(a, "ann");
    await here.join("doc");
    const there = user(b, "ann");
    await there.join("doc");
    await eventually(async () => (await a.rollcall.count("doc")).connections === 2);
    expect(await subscribers(admin, a.rollcall, "doc")).to.equal(2);
    here.socket.disconnect();
    // Its leave removed a connection and published nothing: A lets the room go at once.
    await eventually(async () => (await subscribers(admin, a.rollcall, "doc")) === 1);
    expect((await a.rollcall.count("doc")).connections).to.equal(1);
    expect(lines(a.events, "doc")).to.deep.equal(["join:ann"]);
    // B's socket goes: its leave comes to A no more, but to B's listeners, past a throwing one.
    b.presence.on("event", () => {
      throw new Error("a listener that throws");
    });
    there.socket.disconnect();
    await graceEnds(b.rollcall, "doc", RECOMMENDED.leaveGraceMs);
    await eventually(() => lines(b.events, "doc").includes("leave:ann"), 5_000, "ann's leave");
    expect(b.errors.map((e) => e.message)).to.include("a listener that throws");
  });

  it("gives the leave up when it does not come within the grace and a margin", async function () {
    this.timeout(30_000 + LEAVE_MARGIN_MS);
    const graceMs = 100;
    const [a, b] = [
      await instance({ leaveGraceMs: graceMs }),
      await instance({ leaveGraceMs: graceMs }),
    ];
    const admin = client();
    const ann = user(a, "ann");
    await ann.join("doc");
    await eventually(() => lines(a.events, "doc").includes("join:ann"));
    // Redis's clock stands still: the grace does not end, however long this takes.
    await stopClock(admin, a.rollcall, await redisNow(admin));
    ann.socket.disconnect();
    await eventually(async () => (await a.rollcall.roster("doc")).members[0]?.leavingAt != null);
    // Back within the grace, through B: no leave is published, and A stops waiting for one.
    const again = user(b, "ann");
    await again.join("doc");
    await eventually(async () => (await a.rollcall.roster("doc")).members[0]?.leavingAt === null);
    expect(await subscribers(admin, a.rollcall, "doc")).to.equal(2);
    await eventually(
      async () => (await subscribers(admin, a.rollcall, "doc")) === 1,
      graceMs + LEAVE_MARGIN_MS + 5_000,
      "A's subscription to end",
    );
    expect(lines(a.events, "doc")).to.deep.equal(["join:ann"]);
  });
});

describe("rollcall/hocuspocus: the leave of a document's last connection here", function () {
  this.timeout(30_000);
  let a: Instance;
  const providers: HocuspocusProvider[] = [];

  function open(doc: string, user: string): HocuspocusProvider {
    const p = provider(a.url, doc, user);
    providers.push(p);
    p.setAwarenessField("user", { name: user });
    return p;
  }

  beforeEach(async () => {
    a = await startInstance(redisUrl(), { relay: false });
  });

  afterEach(async () => {
    for (const p of providers.splice(0)) p.destroy();
    await a.stop();
  });

  it("reports it on `event` when the grace ends, once, then unsubscribes the room", async () => {
    const admin = client();
    const ann = open("doc", "ann");
    await eventually(() => lines(a.events, "doc").includes("join:ann"));
    ann.destroy();
    await graceEnds(a.rollcall, "doc", ENGINE.leaveGraceMs!);
    await eventually(() => lines(a.events, "doc").includes("leave:ann"), 5_000, "ann's leave");
    expect(lines(a.events, "doc")).to.deep.equal(["join:ann", "leave:ann"]);
    await eventually(async () => (await subscribers(admin, a.rollcall, "doc")) === 0);
    expect(a.errors).to.deep.equal([]);
  });

  it("goes on with a connection that opens the document while a leave is awaited", async () => {
    const admin = client();
    const ann = open("doc", "ann");
    await eventually(() => lines(a.events, "doc").includes("join:ann"));
    ann.destroy();
    await eventually(async () => (await a.rollcall.roster("doc")).members[0]?.leavingAt != null);
    // Hocuspocus unloaded the document: bob's comes anew, and its awareness is mirrored.
    const bob = open("doc", "bob");
    await eventually(async () => {
      const member = (await a.rollcall.roster("doc")).members.find((m) => m.user === "bob");
      expect(member?.state).to.deep.include({ clients: [bob.document.clientID] });
      return true;
    });
    await graceEnds(a.rollcall, "doc", ENGINE.leaveGraceMs!);
    await eventually(() => lines(a.events, "doc").includes("leave:ann"), 5_000, "ann's leave");
    bob.destroy();
    await graceEnds(a.rollcall, "doc", ENGINE.leaveGraceMs!);
    await eventually(() => lines(a.events, "doc").includes("leave:bob"), 5_000, "bob's leave");
    expect(lines(a.events, "doc")).to.deep.equal([
      "join:ann",
      "join:bob",
      "leave:ann",
      "leave:bob",
    ]);
    await eventually(async () => (await subscribers(admin, a.rollcall, "doc")) === 0);
    expect(a.errors).to.deep.equal([]);
  });
});
