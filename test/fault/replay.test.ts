import { expect } from "chai";
import { Redis } from "ioredis";
import { Rollcall, type PresenceEvent } from "../../src/index.js";
import { isEvalOf, startProxy, type Proxy } from "../kit/proxy.js";
import { caughtUp, IMMEDIATE, listen, redisUrl } from "../kit/redis.js";

/**
 * A reply lost with its connection: the script ran, the proxy swallows the reply and closes the
 * socket, and ioredis (with its defaults) sends the call again. The caller must get the first
 * run's result, and nothing may happen twice.
 */
describe("replies that survive a resend", () => {
  let proxy: Proxy;
  let redis: Redis;
  let rc: Rollcall;
  let events: PresenceEvent[];

  beforeEach(async () => {
    const { hostname, port } = new URL(redisUrl());
    proxy = await startProxy({ host: hostname, port: Number(port) });
    redis = new Redis(proxy.url); // ioredis's defaults: unfulfilled commands are resent
    rc = new Rollcall(redis, IMMEDIATE);
    events = await listen([rc.channel("room")]);
  });

  afterEach(async () => {
    redis.disconnect();
    await proxy.close();
  });

  /** Runs a call whose reply is lost once; returns its result. */
  async function lostReply<T>(marker: string, call: () => Promise<T>): Promise<T> {
    const dropped = proxy.dropNextReply(isEvalOf(marker));
    const result = await call();
    await dropped;
    return result;
  }

  const ofType = (type: string) => events.filter((e) => e.type === type);

  it("heartbeat: the join it published, once", async () => {
    const result = await lostReply("ann", () => rc.heartbeat("room", "ann", "c"));
    await caughtUp(events);
    expect(ofType("join")).to.have.length(1);
    expect(result).to.deep.equal({
      joined: true,
      full: false,
      event: { epoch: events[0]!.epoch, seq: events[0]!.seq },
    });
  });

  it("heartbeat with a new state: the update it published, once", async () => {
    await rc.heartbeat("room", "ann", "c");
    const result = await lostReply("away", () =>
      rc.heartbeat("room", "ann", "c", { state: { s: "away" } }),
    );
    await caughtUp(events);
    expect(ofType("update")).to.have.length(1);
    expect(result.event?.seq).to.equal(ofType("update")[0]!.seq);
  });

  it("leave: the connection removed, and the user's leave, once", async () => {
    await rc.heartbeat("room", "ann", "tab1");
    await rc.heartbeat("room", "ann", "tab2");
    expect(await lostReply("tab1", () => rc.leave("room", "ann", "tab1"))).to.deep.include({
      removed: true,
      left: false,
    });
    const last = await lostReply("tab2", () => rc.leave("room", "ann", "tab2"));
    await caughtUp(events);
    expect(ofType("leave")).to.have.length(1);
    expect(last).to.deep.equal({
      removed: true,
      left: true,
      leaving: false,
      event: { epoch: events[0]!.epoch, seq: ofType("leave")[0]!.seq },
    });
  });

  it("startTyping, stopTyping and setState: each the event it published, once", async () => {
    await rc.heartbeat("room", "ann", "c");
    // One call at a time on the connection: the next request naming ann is the call itself.
    const started = await lostReply("ann", () => rc.startTyping("room", "ann"));
    const stopped = await lostReply("ann", () => rc.stopTyping("room", "ann"));
    const updated = await lostReply("busy", () => rc.setState("room", "ann", { s: "busy" }));
    await caughtUp(events);
    expect(events.map((e) => e.type)).to.deep.equal([
      "join",
      "typing-start",
      "typing-stop",
      "update",
    ]);
    expect(started).to.deep.include({ present: true, started: true });
    expect(stopped).to.deep.include({ stopped: true });
    expect(updated).to.deep.include({ present: true, updated: true });
    expect([started, stopped, updated].map((r) => r.event?.seq)).to.deep.equal(
      events.slice(1).map((e) => e.seq),
    );
  });

  it("leave within a leave grace: leaving, once, and no leave yet", async () => {
    const graced = new Rollcall(redis, { ...IMMEDIATE, prefix: "graced", leaveGraceMs: 60_000 });
    const graceEvents = await listen([graced.channel("room")]);
    await graced.heartbeat("room", "ann", "c");
    const result = await lostReply("ann", () => graced.leave("room", "ann", "c"));
    expect(result).to.deep.equal({ removed: true, left: false, leaving: true, event: null });
    await caughtUp(graceEvents);
    expect(graceEvents.map((e) => e.type)).to.deep.equal(["join"]);
    expect((await graced.roster("room")).members[0]?.leavingAt).to.be.a("number");
  });

  it("heartbeatMany: every entry's result, each event once", async () => {
    // ann present with a state, bob present, cy absent; a full room for dan.
    await rc.heartbeat("room", "ann", "c", { state: { s: "here" } });
    await rc.heartbeat("room", "bob", "c");
    await rc.heartbeat("room", "bob", "c"); // past its first beat: bob's next one is steady
    await rc.heartbeat("small", "eve", "c");
    const batch = [
      { room: "room", user: "bob", connection: "c" }, // steady
      { room: "room", user: "cy", connection: "c" }, // joins
      { room: "room", user: "ann", connection: "c", state: { s: "away" } }, // update
      { room: "small", user: "dan", connection: "c", capacity: 1 }, // full
    ];
    // Each room's channel, to count what was published; the batch goes in one call when both
    // rooms share a bucket, else one per bucket (the proxy drops the first reply naming cy).
    const small = await listen([rc.channel("small")]);
    const results = await lostReply("cy", () => rc.heartbeatMany(batch));
    await caughtUp(events);
    await caughtUp(small);
    expect(ofType("join").map((e) => e.user)).to.deep.equal(["ann", "bob", "cy"]);
    expect(ofType("update").map((e) => e.user)).to.deep.equal(["ann"]);
    expect(small.map((e) => e.type)).to.deep.equal([]);
    const join = ofType("join")[2]!;
    const update = ofType("update")[0]!;
    expect(results).to.deep.equal([
      { joined: false, full: false, event: null },
      { joined: true, full: false, event: { epoch: join.epoch, seq: join.seq } },
      { joined: false, full: false, event: { epoch: update.epoch, seq: update.seq } },
      { joined: false, full: true, event: null },
    ]);
  });

  it("heartbeatMany: a batch of steady entries and joins, resent, joins no one twice", async () => {
    const users = Array.from({ length: 40 }, (_, i) => `u${i}`);
    for (const user of users.slice(0, 20)) {
      await rc.heartbeat("room", user, "c");
      await rc.heartbeat("room", user, "c");
    }
    const results = await lostReply("u39", () =>
      rc.heartbeatMany(users.map((user) => ({ room: "room", user, connection: "c" }))),
    );
    await caughtUp(events);
    expect(ofType("join")).to.have.length(40);
    expect(results.map((r) => (r.error ? r.error.code : r.joined))).to.deep.equal(
      users.map((_, i) => i >= 20),
    );
    const seqs = new Map(ofType("join").map((e) => [e.user, e.seq]));
    expect(results.slice(20).map((r) => (r.error ? r.error.code : r.event?.seq))).to.deep.equal(
      users.slice(20).map((u) => seqs.get(u)),
    );
    expect(await rc.count("room")).to.deep.equal({ users: 40, connections: 40, typing: 0 });
  });
});
