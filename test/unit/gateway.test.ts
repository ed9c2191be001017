import { install, type Clock } from "@sinonjs/fake-timers";
import { expect } from "chai";
import { RoomFeed } from "../../src/gateway/feed.js";
import { HeartbeatWheel } from "../../src/gateway/heartbeats.js";
import { RateLimit } from "../../src/gateway/limits.js";
import type { PresenceEvent } from "../../src/protocol/events.js";

function event(
  type: "join" | "typing-start" | "typing-stop",
  seq: number,
  prev: number,
): PresenceEvent {
  const base = { v: 2, room: "r", user: "u", at: 1, epoch: "e", seq, prev } as const;
  if (type === "join") return { ...base, type, state: null, roster: [], count: 1 };
  if (type === "typing-start") return { ...base, type };
  return { ...base, type, reason: "explicit" };
}

describe("the gateway's room feed", () => {
  function feed() {
    const f = new RoomFeed<string>();
    const sent: Record<string, [string, number, number][]> = { all: [], joins: [] };
    f.deliveries.set("all", { types: null, last: null, broken: false });
    f.deliveries.set("joins", { types: new Set(["join"]), last: null, broken: false });
    const send = (to: string, e: PresenceEvent) => sent[to]!.push([e.type, e.seq, e.prev]);
    return { f, sent, send };
  }

  it("chains what a filtering socket gets over the events it skips", () => {
    const { f, sent, send } = feed();
    f.restart("joins", "e", 10);
    for (const e of [
      event("typing-start", 11, 10),
      event("typing-stop", 12, 11),
      event("join", 13, 12),
    ]) {
      f.receive(e, send);
    }
    expect(sent.all).to.deep.equal([
      ["typing-start", 11, 10],
      ["typing-stop", 12, 11],
      ["join", 13, 12],
    ]);
    expect(sent.joins).to.deep.equal([["join", 13, 10]]);
  });

  it("passes on a gap it saw itself unchanged, for the client to resync", () => {
    const { f, sent, send } = feed();
    f.restart("joins", "e", 10);
    f.receive(event("typing-start", 11, 10), send);
    f.receive(event("typing-stop", 15, 14), send); // 12..14 never reached this gateway
    f.receive(event("join", 16, 15), send);
    expect(sent.joins).to.deep.equal([["join", 16, 15]]);
  });

  it("keeps the chain a socket already has when a snapshot is older than what it got", () => {
    const { f, sent, send } = feed();
    f.receive(event("join", 11, 10), send);
    f.restart("joins", "e", 10); // the snapshot was read before event 11 went out
    f.receive(event("typing-start", 12, 11), send);
    f.receive(event("join", 13, 12), send);
    expect(sent.joins).to.deep.equal([
      ["join", 11, 10],
      ["join", 13, 11],
    ]);
  });
});

describe("the heartbeat wheel", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["setInterval", "clearInterval"] })));
  afterEach(() => clock.uninstall());

  it("beats each entry once per interval from one timer, a new one a full interval later", () => {
    const beats: [string, number][] = [];
    const wheel = new HeartbeatWheel<string>(200, (e) => beats.push([e, clock.now]), 4);
    wheel.start();
    wheel.add("a");
    clock.tick(100);
    wheel.add("b");
    clock.tick(500);
    wheel.remove("a");
    clock.tick(220);
    wheel.stop();
    clock.tick(1_000);
    const at = (e: string) => beats.filter(([b]) => b === e).map(([, t]) => t);
    expect(at("a")).to.deep.equal([200, 400, 600]);
    expect(at("b")).to.deep.equal([300, 500, 700]);
    expect(wheel.size).to.equal(1);
  });
});

describe("the rate limit", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["performance"] })));
  afterEach(() => clock.uninstall());

  it("lets a burst through, then refills at its rate", () => {
    const limit = new RateLimit(3, 20);
    expect([1, 2, 3, 4].map(() => limit.take())).to.deep.equal([true, true, true, false]);
    clock.tick(120); // 2.4 tokens
    expect([1, 2, 3].map(() => limit.take())).to.deep.equal([true, true, false]);
  });

  it("lets the next call through only once a whole token has refilled", () => {
    const limit = new RateLimit(1, 4);
    expect([limit.take(), limit.take()]).to.deep.equal([true, false]);
    clock.tick(125); // half a token
    expect(limit.take()).to.equal(false);
    clock.tick(125);
    expect(limit.take()).to.equal(true);
  });
});
