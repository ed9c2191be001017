import { install } from "@sinonjs/fake-timers";
import { expect } from "chai";
import WebSocket from "ws";
import type { RosterChange } from "../../src/client/index.js";
import { closeGateways, connect, SHORT, startGateway } from "../kit/gateway.js";
import { Rollcall, Subscriber } from "../../src/index.js";
import { stopClock } from "../kit/clock.js";
import { IMMEDIATE, client, listen } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

describe("gateway and client", () => {
  afterEach(closeGateways);

  it("shows a join on one gateway to a client of another, with states and typing", async () => {
    const east = await startGateway();
    const west = await startGateway();
    const ann = connect(east.url, "ann");
    const bob = connect(west.url, "bob");
    const annRoom = await ann.join("doc", { state: { status: "online" } });
    expect(annRoom.roster.members.map((m) => m.user)).to.deep.equal(["ann"]);
    const changes: string[] = [];
    annRoom.on("change", (c: RosterChange) => changes.push(`${c.type}:${c.user}`));
    const bobRoom = await bob.join("doc");
    expect(bobRoom.roster.members.map((m) => [m.user, m.state])).to.deep.equal([
      ["ann", { status: "online" }],
      ["bob", null],
    ]);
    await eventually(() => annRoom.roster.count === 2);
    bobRoom.typing();
    await eventually(() => annRoom.roster.typing.includes("bob"));
    bobRoom.stopTyping();
    await eventually(() => annRoom.roster.typing.length === 0);
    await bobRoom.setState({ status: "away" });
    await eventually(() => annRoom.roster.members[1]?.state?.status === "away");
    bob.close();
    await eventually(() => annRoom.roster.count === 1);
    expect(changes).to.deep.equal([
      "join:bob",
      "typing-start:bob",
      "typing-stop:bob",
      "update:bob",
      "leave:bob",
    ]);
  });

  it("announces every room of a socket that closes without a word", async () => {
    const { url, rollcall } = await startGateway();
    const events = await listen([rollcall.channel("a"), rollcall.channel("b")]);
    const cy = connect(url, "cy");
    await Promise.all([cy.join("a"), cy.join("b")]);
    // A hand-written handler's `finally`: the gateway leaves every room when the socket goes.
    cy.close();
    await eventually(() => events.filter((e) => e.type === "leave").length === 2);
    expect((await rollcall.roster("a")).count).to.equal(0);
  });

  it("keeps a socket present with its own heartbeats, past several windows, with no frame", async () => {
    // The gateway's interval timers (its heartbeat wheel) are fake, and Redis's clock is stopped:
    // they move on together, 100 ms at a time, for three windows, with a sweep after each step.
    const timers = install({ toFake: ["setInterval", "clearInterval"] });
    try {
      const { gateway, url, rollcall } = await startGateway({ sweeper: false });
      let now = Date.now();
      await stopClock(rollcall.redis, rollcall, now);
      const events = await listen([rollcall.channel("doc")]);
      const ann = connect(url, "ann");
      await ann.join("doc");
      const beatLately = async () =>
        now - (await rollcall.roster("doc")).members[0]!.lastSeen < gateway.heartbeatMs;
      for (const end = now + 3 * SHORT.presenceWindowMs!; now < end;) {
        now += 100;
        await stopClock(rollcall.redis, rollcall, now);
        timers.tick(100);
        await eventually(beatLately, 5_000, "the gateway's heartbeat");
        expect(await rollcall.sweepRoom("doc")).to.deep.include({ connections: 0, leaves: 0 });
      }
      expect((await rollcall.roster("doc")).members.map((m) => m.user)).to.deep.equal(["ann"]);
      expect(events.map((e) => e.type)).to.deep.equal(["join"]);
    } finally {
      await closeGateways(); // while its timers are the fake ones it set
      timers.uninstall();
    }
  });

  it("delivers only the types a socket asked for, as an unbroken chain", async () => {
    const { url, rollcall } = await startGateway();
    const quiet = connect(url, "quiet");
    const room = await quiet.join("doc", { types: ["join", "leave"] });
    let syncs = 0;
    room.on("sync", () => (syncs += 1));
    const changes: string[] = [];
    room.on("change", (c: RosterChange) => changes.push(`${c.type}:${c.user}`));
    for (const user of ["ann", "bob"]) {
      await rollcall.heartbeat("doc", user, "c");
      await rollcall.startTyping("doc", user);
      await rollcall.stopTyping("doc", user);
    }
    await rollcall.leave("doc", "ann", "c");
    // A last join marks the end: events reach the socket in order, so all others came before it.
    await rollcall.heartbeat("doc", "zed", "c");
    await eventually(() => changes.includes("join:zed"));
    expect(changes).to.deep.equal(["join:ann", "join:bob", "leave:ann", "join:zed"]);
    expect(syncs).to.equal(0);
    expect(room.roster.members.map((m) => m.user)).to.deep.equal(["bob", "quiet", "zed"]);
  });

  it("sends every socket of a room a new snapshot when its subscriber connection came back", async () => {
    const { url, rollcall } = await startGateway();
    const ann = connect(url, "ann");
    const room = await ann.join("doc");
    let syncs = 0;
    room.on("sync", () => (syncs += 1));
    await rollcall.redis.call("CLIENT", "KILL", "TYPE", "pubsub");
    await eventually(() => syncs === 1, 5_000);
    await rollcall.heartbeat("doc", "bob", "c");
    await eventually(() => room.roster.count === 2);
  });

  it("with the log on, catches a room's sockets up from it instead of new snapshots", async () => {
    const engine = { ...SHORT, logLength: 1_000 };
    const rollcall = new Rollcall(client(), { ...IMMEDIATE, ...engine });
    // This gateway's subscriber misses bob's events, as one whose connection dropped would.
    let missed = 0;
    const subscriber = new Subscriber(rollcall, {
      relay: (_channel, message, deliver) =>
        message.includes('"bob"') ? (missed += 1) : deliver(message),
    });
    const { url } = await startGateway({ subscriber }, engine);
    const ann = connect(url, "ann");
    const room = await ann.join("doc");
    let syncs = 0;
    room.on("sync", () => (syncs += 1));
    await rollcall.heartbeat("doc", "bob", "c");
    await rollcall.startTyping("doc", "bob");
    await eventually(() => missed === 2);
    expect(room.roster.members.map((m) => m.user)).to.deep.equal(["ann"]);
    await rollcall.redis.call("CLIENT", "KILL", "TYPE", "pubsub");
    await eventually(() => room.roster.typing.includes("bob"), 5_000);
    expect(syncs).to.equal(0);
    expect(room.roster.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
    subscriber.close();
  });

  it("sends typing at most once per interval, and typing-stop only after a typing", async () => {
    const { url } = await startGateway();
    const sent: string[] = [];
    // The ws WebSocket, recording what the client writes.
    class Recording extends WebSocket {
      override send(data: string): void {
        sent.push((JSON.parse(data) as { type: string }).type);
        super.send(data);
      }
    }
    const ann = connect(url, "ann", {
      WebSocket: Recording as unknown as typeof globalThis.WebSocket,
      typingIntervalMs: 300,
    });
    const room = await ann.join("doc");
    const clock = install({ now: Date.now(), toFake: ["Date"] }); // the client's clock only
    try {
      room.stopTyping(); // nothing typed yet: nothing to stop
      for (let i = 0; i < 10; i++) room.typing(); // a burst of keystrokes
      clock.tick(350);
      room.typing();
      room.stopTyping(); // the message is sent
      room.stopTyping();
    } finally {
      clock.uninstall();
    }
    await eventually(() => room.roster.typing.length === 0);
    expect(sent.filter((t) => t !== "join")).to.deep.equal(["typing", "typing", "typing-stop"]);
  });
});
