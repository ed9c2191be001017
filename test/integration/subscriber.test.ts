import { setImmediate } from "node:timers/promises";
import { expect } from "chai";
import { Redis } from "ioredis";
import {
  InvalidInputError,
  RedisCallError,
  UnexpectedReplyError,
  Rollcall,
  Subscriber,
  type SubscriberOptions,
} from "../../src/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { IMMEDIATE, client } from "../kit/redis.js";
import { freePort } from "../kit/ports.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

const opened = new Set<Subscriber>();

/** A subscriber whose errors are collected; closed after the test. */
function subscriberOf(rollcall: Rollcall, options: SubscriberOptions = {}) {
  const subscriber = new Subscriber(rollcall, options);
  const errors: Error[] = [];
  subscriber.on("error", (e) => errors.push(e));
  opened.add(subscriber);
  return { subscriber, errors };
}

async function shardSubscribers(channel: string): Promise<number> {
  const reply = (await client().call("PUBSUB", "SHARDNUMSUB", channel)) as [string, number];
  return reply[1];
}

/** What a promise rejects with (undefined if it fulfils). */
function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("subscriber", () => {
  afterEach(() => {
    for (const subscriber of opened) subscriber.close();
    opened.clear();
  });

  it("delivers a join made through another instance", async () => {
    const here = new Rollcall(client(), IMMEDIATE);
    const there = new Rollcall(client(), IMMEDIATE);
    const { subscriber, errors } = subscriberOf(here);
    const events: PresenceEvent[] = [];
    await subscriber.subscribe("room", (e) => events.push(e));

    await there.heartbeat("room", "ann", "c1");
    await eventually(() => events.length === 1);
    expect(events[0]).to.include({ type: "join", room: "room", user: "ann", prev: 0 });
    expect(errors).to.deep.equal([]);
  });

  it("filters each subscription by event type", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = subscriberOf(new Rollcall(client(), IMMEDIATE));
    const all: PresenceEvent[] = [];
    const presence: PresenceEvent[] = [];
    await subscriber.subscribe("room", (e) => all.push(e));
    await subscriber.subscribe("room", (e) => presence.push(e), { types: ["join", "leave"] });

    await rc.heartbeat("room", "ann", "c1");
    await rc.startTyping("room", "ann");
    await rc.setState("room", "ann", { status: "away" });
    await rc.stopTyping("room", "ann");
    await rc.leave("room", "ann", "c1");
    await eventually(() => all.length === 5);
    expect(all.map((e) => e.type)).to.deep.equal([
      "join",
      "typing-start",
      "update",
      "typing-stop",
      "leave",
    ]);
    expect(presence.map((e) => e.type)).to.deep.equal(["join", "leave"]);
  });

  it("rejects an unknown event type before subscribing", async () => {
    const { subscriber } = subscriberOf(new Rollcall(client(), IMMEDIATE));
    const types = ["join", "joined"] as unknown as ["join"];
    const failure = await rejection(subscriber.subscribe("room", () => {}, { types }));
    expect(failure).to.be.instanceOf(InvalidInputError).with.property("code", "INVALID_OPTION");
    expect(await shardSubscribers(subscriber.rollcall.channel("room"))).to.equal(0);
  });

  it("rejects bad options and listeners with typed errors, never a raw TypeError", async () => {
    const { subscriber } = subscriberOf(new Rollcall(client(), IMMEDIATE));
    const bad: [unknown, unknown][] = [
      [() => {}, { types: 5 }],
      [() => {}, { types: "join" }],
      [() => {}, { onLost: "soon" }],
      [() => {}, { typo: true }],
      [() => {}, []],
      [null, {}],
      ["listener", undefined],
    ];
    for (const [listener, options] of bad) {
      const failure = await rejection(
        subscriber.subscribe("room", listener as never, options as never),
      );
      expect(failure, JSON.stringify(options)).to.be.instanceOf(InvalidInputError);
    }
    // null options are no options.
    const ok = await subscriber.subscribe("room", () => {}, null as never);
    await ok.close();
    expect(await shardSubscribers(subscriber.rollcall.channel("room"))).to.equal(0);
  });

  it("subscribes a room's channel once, while any subscription to it is open", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = subscriberOf(rc);
    const channel = rc.channel("room");
    const first: PresenceEvent[] = [];
    const second: PresenceEvent[] = [];
    const a = await subscriber.subscribe("room", (e) => first.push(e));
    const b = await subscriber.subscribe("room", (e) => second.push(e));
    expect(await shardSubscribers(channel)).to.equal(1);

    await a.close();
    await a.close();
    expect(await shardSubscribers(channel)).to.equal(1);
    await rc.heartbeat("room", "ann", "c1");
    await eventually(() => second.length === 1);

    await b.close();
    expect(await shardSubscribers(channel)).to.equal(0);

    const third: PresenceEvent[] = [];
    await subscriber.subscribe("room", (e) => third.push(e));
    expect(await shardSubscribers(channel)).to.equal(1);
    await rc.leave("room", "ann", "c1");
    await eventually(() => third.length === 1);
    expect(first).to.deep.equal([]);
    expect(second.map((e) => e.type)).to.deep.equal(["join"]);
    expect(third.map((e) => e.type)).to.deep.equal(["leave"]);
  });

  it("reports malformed and foreign messages on a room's channel and skips them", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const { subscriber, errors } = subscriberOf(rc);
    const events: PresenceEvent[] = [];
    await subscriber.subscribe("room", (e) => events.push(e));
    const channel = rc.channel("room");
    const admin = client();
    const foreign = {
      v: 1,
      type: "typing-start",
      room: "other",
      user: "u",
      at: 1,
      seq: 9,
      prev: 0,
    };
    await admin.spublish(channel, "garbage{");
    await admin.spublish(channel, JSON.stringify({ v: 1, type: "join" }));
    await admin.spublish(channel, JSON.stringify(foreign));

    await rc.heartbeat("room", "ann", "c1");
    await eventually(() => events.length === 1);
    expect(events[0]).to.include({ type: "join", user: "ann" });
    expect(errors).to.have.length(3);
    for (const error of errors) {
      expect(error)
        .to.be.instanceOf(UnexpectedReplyError)
        .with.property("code", "UNEXPECTED_REPLY");
    }
    expect(errors[0]!.message).to.contain('"room"').and.contain("garbage{");
  });

  it("reports a listener that throws and keeps delivering", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const { subscriber, errors } = subscriberOf(rc);
    const events: PresenceEvent[] = [];
    await subscriber.subscribe("room", () => {
      throw new Error("listener bug");
    });
    await subscriber.subscribe("room", (e) => events.push(e));

    await rc.heartbeat("room", "ann", "c1");
    await rc.leave("room", "ann", "c1");
    await eventually(() => events.length === 2);
    expect(errors.map((e) => e.message)).to.deep.equal(["listener bug", "listener bug"]);
  });

  it("without an 'error' listener, reports as a process warning instead of throwing", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const subscriber = new Subscriber(rc);
    opened.add(subscriber);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const events: PresenceEvent[] = [];
      await subscriber.subscribe("room", (e) => events.push(e));
      await client().spublish(rc.channel("room"), "not an event");
      await rc.heartbeat("room", "ann", "c1");
      await eventually(() => events.length === 1 && warnings.length === 1);
      expect(warnings[0]).to.be.instanceOf(UnexpectedReplyError);
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("reports connection errors and rejects subscribing with a typed error, leaving nothing unhandled", async () => {
    const unreachable = new Redis({
      host: "127.0.0.1",
      port: await freePort(),
      lazyConnect: true,
      retryStrategy: () => null,
    });
    const unhandled = watchUnhandled();
    try {
      const { subscriber, errors } = subscriberOf(new Rollcall(unreachable, IMMEDIATE));
      const failure = await rejection(subscriber.subscribe("room", () => {}));
      expect(failure).to.be.instanceOf(RedisCallError).with.property("code", "REDIS_UNAVAILABLE");
      const watchFailure = await rejection(subscriber.watch("room"));
      expect(watchFailure)
        .to.be.instanceOf(RedisCallError)
        .with.property("code", "REDIS_UNAVAILABLE");
      expect(errors.length).to.be.greaterThan(0);
      expect(errors[0]).to.be.instanceOf(RedisCallError);
      expect(errors[0]!.message).to.contain("subscriber connection");
      // Its connection gave up (no retries); what its failures reject is settled a turn later.
      await eventually(() => subscriber.connection.status === "end");
      await setImmediate();
      expect(unhandled.count()).to.equal(0);
    } finally {
      unhandled.stop();
      unreachable.disconnect();
    }
  });

  it("re-subscribes every room after its connection is killed, and says so", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = subscriberOf(rc);
    const events: PresenceEvent[] = [];
    const lost: string[] = [];
    const back: string[] = [];
    for (const room of ["r1", "r2"]) {
      await subscriber.subscribe(room, (e) => events.push(e), {
        onLost: () => lost.push(room),
        onResubscribed: () => back.push(room),
      });
    }

    expect(await client().call("CLIENT", "KILL", "TYPE", "pubsub")).to.equal(1);
    await eventually(() => back.length === 2);
    expect(lost).to.deep.equal(["r1", "r2"]);
    expect(back).to.deep.equal(["r1", "r2"]);
    await rc.heartbeat("r1", "ann", "c1");
    await rc.heartbeat("r2", "bob", "c1");
    await eventually(() => events.length === 2);
    expect(events.map((e) => e.room).sort()).to.deep.equal(["r1", "r2"]);
  });

  it("close() ends every subscription and the connection", async () => {
    const rc = new Rollcall(client(), IMMEDIATE);
    const { subscriber } = subscriberOf(rc);
    const lost: string[] = [];
    await subscriber.subscribe("room", () => {}, { onLost: () => lost.push("room") });
    expect(await shardSubscribers(rc.channel("room"))).to.equal(1);

    subscriber.close();
    expect(subscriber.closed).to.equal(true);
    expect(lost).to.deep.equal(["room"]);
    const failure = await rejection(subscriber.subscribe("room", () => {}));
    expect(failure).to.be.instanceOf(RedisCallError);
    const unsubscribed = async () => (await shardSubscribers(rc.channel("room"))) === 0;
    await eventually(unsubscribed, 5_000, "the subscriber connection to go");
  });
});
