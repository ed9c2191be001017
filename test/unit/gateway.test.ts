import { expect } from "chai";
import { RoomFeed } from "../../src/gateway/feed.js";
import { HeartbeatWheel } from "../../src/gateway/heartbeats.js";
import { RateLimit } from "../../src/gateway/limits.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { sleep } from "../support/redis.js";

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
  it("beats each entry once per interval from one timer, a new one a full interval later", async () => {
    const beats: string[] = [];
    const wheel = new HeartbeatWheel<string>(200, (e) => beats.push(e), 4);
    wheel.start();
    wheel.add("a");
    await sleep(100);
    wheel.add("b");
    await sleep(500);
    wheel.remove("a");
    await sleep(220);
    wheel.stop();
    const count = (e: string) => beats.filter((b) => b === e).length;
    expect(count("a")).to.be.within(2, 3);
    expect(count("b")).to.be.within(3, 4);
    expect(wheel.size).to.equal(1);
  });
});

describe("the rate limit", () => {
  it("lets a burst through, then refills at its rate", async () => {
    const limit = new RateLimit(3, 20);
    expect([1, 2, 3, 4].map(() => limit.take())).to.deep.equal([true, true, true, false]);
    await sleep(120);
    expect([1, 2, 3].map(() => limit.take())).to.deep.equal([true, true, false]);
  });
});
