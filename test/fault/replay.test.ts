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
});
