import { install, type Clock } from "@sinonjs/fake-timers";
import { expect } from "chai";
import { RoomFeed } from "../../src/gateway/feed.js";
import { HeartbeatWheel } from "../../src/runtime/heartbeats.js";
import { RateLimit } from "../../src/runtime/rateLimit.js";
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
  const snapshot = (seq: number, count = 1, epoch = "e") =>
    ({ room: "r", epoch, seq, count, members: [], typing: [] }) as const;

  function feed() {
    const sent = { all: [] as string[], joins: [] as string[] };
    const f = new RoomFeed<string>({
      event: (to, e) => sent[to as keyof typeof sent].push(`${e.type} ${e.seq}/${e.prev}`),
      snapshot: (to, s) => sent[to as keyof typeof sent].push(`snapshot ${s.seq}`),
    });
    f.deliveries.set("all", { types: null, last: null });
    f.deliveries.set("joins", { types: new Set(["join"]), last: null });
    return { f, sent };
  }

  it("chains what a filtering socket gets over the events it skips", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10));
    f.restart("joins", snapshot(10));
    for (const e of [
      event("typing-start", 11, 10),
      event("typing-stop", 12, 11),
      event("join", 13, 12),
    ]) {
      expect(f.receive(e)).to.equal(false);
    }
    expect(sent.all).to.deep.equal(["typing-start 11/10", "typing-stop 12/11", "join 13/12"]);
    expect(sent.joins).to.deep.equal(["join 13/10"]);
  });

  it("holds back a gap, asks for one resync, then passes on what follows the snapshot", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10));
    f.restart("joins", snapshot(10));
    expect(f.receive(event("typing-start", 11, 10))).to.equal(false);
    expect(f.receive(event("typing-stop", 15, 14))).to.equal(true); // 12..14 never came
    expect(f.receive(event("join", 16, 15))).to.equal(false); // held while the resync runs
    f.install(snapshot(15));
    expect(sent.all).to.deep.equal(["typing-start 11/10", "snapshot 15", "join 16/15"]);
    expect(sent.joins).to.deep.equal(["snapshot 15", "join 16/15"]);
  });

  it("does not send a socket what its own snapshot, newer than the feed, already holds", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10));
    f.restart("joins", snapshot(12)); // read after 11 and 12 were published
    f.receive(event("join", 11, 10));
    f.receive(event("typing-start", 12, 11));
    f.receive(event("join", 13, 12));
    expect(sent.joins).to.deep.equal(["join 13/12"]);
    expect(sent.all).to.deep.equal(["join 11/10", "typing-start 12/11", "join 13/12"]);
  });

  it("treats an event that takes a number already passed, with other content, as a conflict", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10));
    const forged = { ...event("join", 11, 10), user: "phantom" };
    expect(f.receive(forged)).to.equal(false); // it fits: only the real one can tell
    expect(f.receive(event("join", 11, 10))).to.equal(true);
    f.install(snapshot(11));
    expect(sent.all).to.deep.equal(["join 11/10", "snapshot 11"]);
  });

  it("starts over from a resync's snapshot below a huge number some message claimed", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10));
    expect(f.receive(event("join", 1e15, 10))).to.equal(false);
    expect(f.receive(event("join", 11, 10))).to.equal(true); // below it, never passed on
    f.install(snapshot(11));
    expect(f.receive(event("typing-start", 12, 11))).to.equal(false);
    expect(sent.all.slice(-2)).to.deep.equal(["snapshot 11", "typing-start 12/11"]);
  });
});

describe("the heartbeat wheel", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["setInterval", "clearInterval"] })));
  afterEach(() => clock.uninstall());

  it("beats each slot's entries together once per interval from one timer", () => {
    const beats: [string[], number][] = [];
    const wheel = new HeartbeatWheel<string>(200, (e) => beats.push([e.sort(), clock.now]), 4);
    wheel.start();
    wheel.add("a", 3);
    wheel.add("c", 7); // slot 3 too: slots wrap around
    clock.tick(100);
    wheel.add("b", 1);
    clock.tick(500);
    wheel.remove("a");
    clock.tick(220);
    wheel.stop();
    clock.tick(1_000);
    // Slot k goes out at 50 (k + 1) ms, then every 200 ms.
    expect(beats).to.deep.equal([
      [["a", "c"], 200],
      [["b"], 300],
      [["a", "c"], 400],
      [["b"], 500],
      [["a", "c"], 600],
      [["b"], 700],
      [["c"], 800],
    ]);
    expect(wheel.size).to.equal(2);
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
