// rollcall/hocuspocus with the real libraries: @hocuspocus/server 3.4 instances with
// @hocuspocus/extension-redis on one Redis, @hocuspocus/provider clients over `ws`. Instance A
// runs in the test's process; B, which a test SIGKILLs, in a process of its own. Windows are
// the recommended ones (10 s presence, 2 s grace), moved through on the test clock.
import { expect } from "chai";
import type { HocuspocusProvider } from "@hocuspocus/provider";
import { HocuspocusPresence } from "../../src/hocuspocus/index.js";
import { Rollcall } from "../../src/index.js";
import type { LeaveEvent, PresenceEvent } from "../../src/protocol/events.js";
import { advanceClock } from "../kit/clock.js";
import {
  ENGINE,
  FAST,
  provider,
  spawnInstance,
  startInstance,
  type Instance,
  type InstanceProcess,
} from "../kit/hocuspocus.js";
import { caughtUp, client, listen, ownRedis, redisUrl } from "../kit/redis.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

const STEP_MS = 1_000;

describe("rollcall/hocuspocus: two Hocuspocus instances on one Redis", function () {
  this.timeout(30_000);
  let a: Instance;
  let b: InstanceProcess;
  let rollcall: Rollcall;
  const providers = new Set<HocuspocusProvider>();

  function open(url: string, doc: string, user: string): HocuspocusProvider {
    const p = provider(url, doc, user);
    providers.add(p);
    p.setAwarenessField("user", { name: user });
    return p;
  }

  const eventsOf = (user: string, type?: PresenceEvent["type"]) =>
    a.events.map((e) => e.event).filter((e) => e.user === user && (!type || e.type === type));

  /** Whether a provider holds an awareness state of the given client. */
  const sees = (p: HocuspocusProvider, clientId: number) => p.awareness!.getStates().has(clientId);

  beforeEach(async function () {
    this.timeout(30_000);
    rollcall = new Rollcall(client(), ENGINE);
    [a, b] = await Promise.all([startInstance(redisUrl()), spawnInstance(redisUrl())]);
  });

  afterEach(async function () {
    this.timeout(30_000);
    for (const p of providers) p.destroy();
    providers.clear();
    await Promise.all([a.stop(), b.stop()]);
  });

  /**
   * Moves the test clock on, a step at a time, until `done`; after each step, waits for A to
   * have heartbeated its (`local`) members past it, so that only the silent ones expire.
   */
  async function moveTime(doc: string, local: string[], done: () => boolean, maxMs: number) {
    let moved = 0;
    while (!done() && moved < maxMs) {
      await advanceClock(client(), rollcall, STEP_MS);
      moved += STEP_MS;
      const { at } = await rollcall.roster(doc);
      await eventually(async () => {
        const { members } = await rollcall.roster(doc);
        return members.filter((m) => local.includes(m.user)).every((m) => m.lastSeen >= at);
      });
      await rollcall.sweepRoom(doc).catch(() => undefined);
    }
    return moved;
  }

  it("shows B's joins, awareness state and leaves to A, and counts across instances", async () => {
    const events = await listen([rollcall.channel("doc-1")]);
    const ann = open(a.url, "doc-1", "ann");
    // Ann is in: A follows the document (it subscribes before its first join).
    await eventually(async () => (await rollcall.count("doc-1")).users === 1);
    const bob = open(b.url, "doc-1", "bob");
    bob.setAwarenessField("cursor", { x: 1, y: 2 });
    await eventually(() => eventsOf("bob", "join").length === 1, 5_000, "bob's join on A");
    // Bob's awareness, mirrored as his member state: his client id and the fields that fit.
    await eventually(async () => {
      const member = (await a.presence.roster("doc-1")).members.find((m) => m.user === "bob");
      expect(member?.state).to.deep.equal({
        clients: [bob.document.clientID],
        awareness: { cursor: { x: 1, y: 2 }, user: { name: "bob" } },
      });
      return true;
    }, 5_000);
    // It came with the join, or in an update after it.
    const seen = eventsOf("bob").map((e) =>
      e.type === "join" || e.type === "update" ? e.state : null,
    );
    expect(seen).to.deep.include(
      (await a.presence.roster("doc-1")).members.find((m) => m.user === "bob")!.state,
    );
    // extension-redis relays the awareness itself: ann's client sees bob.
    await eventually(() => sees(ann, bob.document.clientID), 5_000, "bob's awareness at ann");
    expect(await a.presence.count("doc-1")).to.deep.include({ users: 2, connections: 2 });

    bob.destroy();
    providers.delete(bob);
    // The clean leave waits for the grace, on the test clock.
    await eventually(async () => {
      const { members } = await rollcall.roster("doc-1");
      return members.find((m) => m.user === "bob")?.leavingAt != null;
    });
    await advanceClock(client(), rollcall, ENGINE.leaveGraceMs!);
    await rollcall.sweepRoom("doc-1");
    await eventually(() => eventsOf("bob", "leave").length === 1, 5_000, "bob's leave on A");
    expect((eventsOf("bob", "leave")[0] as LeaveEvent).reason).to.equal("explicit");
    expect(await a.presence.count("doc-1")).to.deep.include({ users: 1, connections: 1 });
    await caughtUp(events);
    expect(events.filter((e) => e.type === "join").map((e) => e.user)).to.have.members([
      "ann",
      "bob",
    ]);
  });

  it("announces a SIGKILLed instance's users once, within window + grace, and removes their awareness", async () => {
    const events = await listen([rollcall.channel("doc-kill")]);
    const ann = open(a.url, "doc-kill", "ann");
    const bob = open(b.url, "doc-kill", "bob");
    const bobClient = bob.document.clientID;
    await eventually(async () => {
      const member = (await rollcall.roster("doc-kill")).members.find((m) => m.user === "bob");
      return (member?.state?.clients as number[] | undefined)?.includes(bobClient) === true;
    }, 5_000);
    await eventually(() => sees(ann, bobClient), 5_000, "bob's awareness at ann");
    const document = a.server.hocuspocus.documents.get("doc-kill")!;
    expect(document.awareness.getStates().has(bobClient)).to.equal(true);

    b.child.kill("SIGKILL");
    await b.exited;
    // Destroyed only once its websocket's retry loop runs (which destroy() stops): the provider
    // schedules a reconnect when its socket closes, and one scheduled before destroy() would run
    // after it, and retry for ever.
    await eventually(
      () => bob.configuration.websocketProvider.cancelWebsocketRetry !== undefined,
      5_000,
      "bob's provider reconnecting",
    );
    bob.destroy();
    providers.delete(bob);
    const before = await rollcall.roster("doc-kill");
    const killedAt = before.at;
    const lastSeen = before.members.find((m) => m.user === "bob")!.lastSeen;

    const bound = ENGINE.presenceWindowMs! + ENGINE.leaveGraceMs!;
    // The test clock moves in steps on top of real time, which also passes meanwhile.
    const realStart = performance.now();
    await moveTime(
      "doc-kill",
      ["ann"],
      () => eventsOf("bob", "leave").length > 0,
      bound + 5 * STEP_MS,
    );
    const [leave] = eventsOf("bob", "leave") as LeaveEvent[];
    expect(leave?.reason).to.equal("expired");
    // Not before the window and the grace have passed since bob was last seen; within them (and
    // one step of the clock, the sweep's granularity here, and the real time the steps took) of
    // the kill.
    expect(leave!.at - lastSeen).to.be.at.least(bound);
    expect(leave!.at - killedAt).to.be.at.most(bound + STEP_MS + (performance.now() - realStart));
    // The survivor removes bob's awareness state, and its client hears it: far sooner than
    // the 30 s awareness timeout (this test has run for a few seconds of real time).
    await eventually(() => !sees(ann, bobClient), 5_000, "bob's awareness gone at ann");
    expect(document.awareness.getStates().has(bobClient)).to.equal(false);
    expect(sees(ann, ann.document.clientID)).to.equal(true);

    // Exactly once, also while time goes on; ann stays.
    await moveTime("doc-kill", ["ann"], () => false, 3 * STEP_MS);
    await caughtUp(events);
    expect(events.filter((e) => e.type === "leave").map((e) => e.user)).to.deep.equal(["bob"]);
    expect(eventsOf("bob", "leave")).to.have.length(1);
    expect(await a.presence.count("doc-kill")).to.deep.include({ users: 1, connections: 1 });
  });

  it("publishes nothing when a user reconnects within the grace", async () => {
    open(a.url, "doc-back", "ann");
    await eventually(async () => (await rollcall.count("doc-back")).users === 1);
    const bob = open(b.url, "doc-back", "bob");
    await eventually(() => eventsOf("bob", "join").length === 1, 5_000, "bob's join on A");
    const events = await listen([rollcall.channel("doc-back")]);
    bob.destroy();
    providers.delete(bob);
    await eventually(async () => (await rollcall.count("doc-back")).connections === 1);
    open(a.url, "doc-back", "bob"); // back, through the other instance
    await eventually(async () => (await rollcall.count("doc-back")).connections === 2);
    await advanceClock(client(), rollcall, ENGINE.leaveGraceMs! + STEP_MS);
    await rollcall.sweepRoom("doc-back");
    await caughtUp(events);
    expect(events.filter((e) => e.type === "join" || e.type === "leave")).to.deep.equal([]);
    expect(await a.presence.count("doc-back")).to.deep.include({ users: 2, connections: 2 });
  });
});

describe("rollcall/hocuspocus: bad input and outages", function () {
  this.timeout(30_000);
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
  });

  it("rejects bad options and document names with typed errors", async () => {
    const rollcall = new Rollcall(client(), ENGINE);
    expect(() => new HocuspocusPresence(rollcall, { heartbeatMs: 0 }))
      .to.throw()
      .with.property("code", "INVALID_OPTION");
    expect(() => new HocuspocusPresence(rollcall, { nope: 1 } as never))
      .to.throw()
      .with.property("code", "INVALID_OPTION");
    expect(() => new HocuspocusPresence(new Rollcall(client(), { maxStateBytes: 100 })))
      .to.throw()
      .with.property("code", "INVALID_OPTION");
    const presence = new HocuspocusPresence(rollcall, { sweeper: false });
    stops.push(() => presence.close());
    for (const name of ["", "a\u0000b", 42]) {
      const error = await presence.roster(name as string).catch((e: unknown) => e);
      expect(error).to.have.property("code", "INVALID_ID");
    }
  });

  it("closes a connection whose user id is invalid, and reports it", async () => {
    const instance = await startInstance(redisUrl());
    stops.push(() => instance.stop());
    const p = provider(instance.url, "doc-bad", "bad\u0001user");
    stops.push(() => Promise.resolve(p.destroy()));
    await eventually(() => instance.errors.length > 0, 5_000, "the identity's error");
    expect(instance.errors[0]).to.have.property("code", "INVALID_ID");
    expect(await instance.presence.count("doc-bad")).to.deep.include({ users: 0 });
  });

  it("closes a connection whose identify hook hangs, throws, rejects or returns junk, or whose room hook returns junk, and reports it", async () => {
    const unhandled = watchUnhandled();
    stops.push(() => Promise.resolve(unhandled.stop()));
    const instance = await startInstance(redisUrl(), {
      presence: {
        ...FAST,
        identifyTimeoutMs: 200,
        identify: ({ context }) => {
          const user = (context as { user: { id: string } }).user.id;
          if (user === "hang") return new Promise<string>(() => undefined);
          if (user === "reject") return Promise.reject(new Error("no such user"));
          if (user === "throw") throw new Error("identify threw");
          if (user === "junk") return 7 as never;
          return user;
        },
        room: ((name: string) => (name === "doc-junk" ? 42 : name)) as never,
      },
    });
    stops.push(() => instance.stop());
    for (const [doc, user] of [
      ["doc-hang", "hang"],
      ["doc-reject", "reject"],
      ["doc-junk", "ann"],
      ["doc-throw", "throw"],
      ["doc-junkuser", "junk"],
    ]) {
      const p = provider(instance.url, doc!, user!);
      stops.push(() => Promise.resolve(p.destroy()));
    }
    const ok = provider(instance.url, "doc-ok", "bob");
    stops.push(() => Promise.resolve(ok.destroy()));
    await eventually(() => instance.errors.length >= 5, 10_000, "five errors reported");
    expect(instance.errors.map((e) => e.message).sort()).to.deep.equal([
      "identify threw",
      "no such user",
      "the identify hook returned 7, not a user id",
      "the identify hook took longer than 200 ms",
      "the room hook returned 42, not a room id",
    ]);
    await eventually(async () => (await instance.presence.count("doc-ok")).users === 1);
    for (const doc of ["doc-hang", "doc-reject", "doc-throw", "doc-junkuser"]) {
      expect((await instance.presence.count(doc)).users).to.equal(0);
    }
    expect(unhandled.count()).to.equal(0);
  });

  it("rides out a Redis outage: no crash, no unhandled rejection, joined once Redis is back", async () => {
    const unhandled = watchUnhandled();
    stops.push(() => Promise.resolve(unhandled.stop()));
    const own = await ownRedis();
    const instance = await startInstance(own.url, {
      relay: false, // extension-redis's own calls are not this test's
      redis: { maxRetriesPerRequest: 0, retryStrategy: () => 50 },
    });
    stops.push(() => instance.stop());
    const ann = provider(instance.url, "doc-down", "ann");
    stops.push(() => Promise.resolve(ann.destroy()));
    await eventually(async () => (await instance.presence.count("doc-down")).users === 1);
    await own.server.stop();
    const bob = provider(instance.url, "doc-down", "bob");
    stops.push(() => Promise.resolve(bob.destroy()));
    ann.setAwarenessField("user", { name: "ann" });
    await eventually(() => instance.errors.length > 0, 10_000, "an error reported");
    await own.server.start();
    await eventually(async () => (await instance.presence.count("doc-down")).users === 2, 10_000);
    expect(unhandled.count()).to.equal(0);
  });
});
