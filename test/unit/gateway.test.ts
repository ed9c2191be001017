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
