import { install, type Clock } from "@sinonjs/fake-timers";
import { expect } from "chai";
import { CountWatch } from "../../src/runtime/counts.js";
import { Batch, RoomFeed, type Coalescing } from "../../src/runtime/feed.js";
import { SharedSnapshot } from "../../src/runtime/snapshots.js";
import type { Roster } from "../../src/engine/scripts/roster.js";
import { HeartbeatWheel } from "../../src/runtime/heartbeats.js";
import { RateLimit } from "../../src/runtime/rateLimit.js";
import type { PresenceEvent } from "../../src/protocol/events.js";

function event(
  type: "join" | "typing-start" | "typing-stop",
  seq: number,
  prev: number,
  count = 1,
): PresenceEvent {
  const base = { v: 2, room: "r", user: "u", at: 1, epoch: "e", seq, prev } as const;
  if (type === "join") return { ...base, type, state: null, roster: [], count };
  if (type === "typing-start") return { ...base, type };
  return { ...base, type, reason: "explicit" };
}

describe("the gateway's room feed", () => {
  const snapshot = (seq: number, count = 1, epoch = "e") =>
    ({ room: "r", epoch, seq, count, members: [], typing: [] }) as const;

  function feed(coalescing: Coalescing = { fromMembers: 1_000, intervalMs: 50 }) {
    const sent = { all: [] as string[], joins: [] as string[] };
    const batches = { all: [] as Batch[], joins: [] as Batch[] };
    const f = new RoomFeed<string>(
      "r",
      {
        events: (to, batch) => {
          batches[to as keyof typeof batches].push(batch);
          for (const e of batch.events) {
            sent[to as keyof typeof sent].push(`${e.type} ${e.seq}/${e.prev}`);
          }
        },
        snapshot: (to, s) => sent[to as keyof typeof sent].push(`snapshot ${s.seq}`),
      },
      coalescing,
    );
    f.follows.set("all", { types: null, last: null });
    f.follows.set("joins", { types: new Set(["join"]), last: null });
    return { f, sent, batches };
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

describe("a large room's coalesced feed", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["setTimeout", "clearTimeout", "performance"] })));
  afterEach(() => clock.uninstall());

  const snapshot = (seq: number, count: number) =>
    ({ room: "r", epoch: "e", seq, count, members: [], typing: [] }) as const;

  function feed() {
    const sent = { all: [] as Batch[], joins: [] as Batch[] };
    const f = new RoomFeed<string>(
      "r",
      {
        events: (to, batch) => sent[to as keyof typeof sent].push(batch),
        snapshot: () => undefined,
      },
      { fromMembers: 100, intervalMs: 50 },
    );
    f.follows.set("all", { types: null, last: null });
    f.follows.set("joins", { types: new Set(["join"]), last: null });
    return { f, sent };
  }
  const chain = (batches: Batch[]) => batches.map((b) => b.events.map((e) => `${e.seq}/${e.prev}`));

  it("sends a large room's events together at most every interval, in unbroken chains", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10, 500));
    f.restart("joins", snapshot(10, 500));
    // After a quiet interval: at once, with what came in the same turn.
    f.receive(event("join", 11, 10, 501));
    f.receive(event("typing-start", 12, 11));
    expect(sent.all).to.have.length(0);
    clock.tick(20);
    f.receive(event("join", 13, 12, 502));
    expect(chain(sent.all)).to.deep.equal([["11/10", "12/11"]]);
    clock.tick(30);
    f.receive(event("typing-stop", 14, 13));
    f.receive(event("join", 15, 14, 503));
    clock.tick(49);
    expect(chain(sent.all)).to.deep.equal([["11/10", "12/11"], ["13/12"]]);
    clock.tick(1);
    expect(chain(sent.all)).to.deep.equal([["11/10", "12/11"], ["13/12"], ["14/13", "15/14"]]);
    // The filtering socket's chain skips what it does not get, across batches too.
    expect(chain(sent.joins)).to.deep.equal([["11/10"], ["13/11"], ["15/13"]]);
  });

  it("encodes a batch once: every socket that gets all of it gets the same frames", () => {
    const { f, sent } = feed();
    f.follows.set("joins", { types: null, last: null });
    f.restart("all", snapshot(10, 500));
    f.restart("joins", snapshot(10, 500));
    f.receive(event("join", 11, 10, 501));
    f.receive(event("typing-start", 12, 11));
    f.receive(event("join", 13, 12, 502));
    clock.tick(50);
    expect(sent.all).to.have.length(1);
    expect(sent.joins[0]).to.equal(sent.all[0]);
    const batch = sent.all[0]!;
    expect(batch.frames(2)).to.have.length(1);
    expect(JSON.parse(batch.frames(2)[0]!.toString())).to.include({ type: "events", room: "r" });
    // Version 1 sockets get the same events as one event frame each.
    expect(
      batch.frames(1).map((t) => (JSON.parse(t.toString()) as { type: string }).type),
    ).to.deep.equal(["event", "event", "event"]);
  });

  it("sends a small room's events at once, and what a shrinking room kept back with the next", () => {
    const { f, sent } = feed();
    f.restart("all", snapshot(10, 100));
    f.receive(event("typing-start", 11, 10));
    f.receive(event("typing-stop", 12, 11));
    expect(sent.all).to.have.length(0);
    f.receive(event("join", 13, 12, 99)); // below the mark now
    expect(chain(sent.all)).to.deep.equal([["11/10", "12/11", "13/12"]]);
    f.receive(event("typing-start", 14, 13));
    expect(chain(sent.all)).to.deep.equal([["11/10", "12/11", "13/12"], ["14/13"]]);
  });

  it("sends what it kept back before a resync's snapshot", () => {
    const snaps: string[] = [];
    const f = new RoomFeed<string>(
      "r",
      {
        events: (_to, batch) => snaps.push(...batch.events.map((e) => `event ${e.seq}`)),
        snapshot: (_to, s) => snaps.push(`snapshot ${s.seq}`),
      },
      { fromMembers: 100, intervalMs: 50 },
    );
    f.follows.set("all", { types: null, last: null });
    f.restart("all", snapshot(10, 500));
    f.receive(event("typing-start", 11, 10));
    f.receive(event("typing-stop", 12, 11));
    expect(snaps).to.deep.equal([]);
    f.install(snapshot(20, 500));
    expect(snaps).to.deep.equal(["event 11", "event 12", "snapshot 20"]);
  });
});

describe("a watched room's count", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["setTimeout", "clearTimeout", "performance"] })));
  afterEach(() => clock.uninstall());

  it("tells each watcher a changed count, at most once per interval, the newest by number", () => {
    const sent: [string, number, number][] = [];
    const counts = new CountWatch<string>((to, n) => sent.push([to, n, clock.now]), 1_000);
    counts.add("a");
    counts.sent("a", 5);
    counts.see(event("join", 11, 10, 6));
    counts.see(event("join", 12, 11, 7));
    counts.see(event("typing-start", 13, 12));
    counts.see(event("join", 9, 8, 1)); // older: ignored
    clock.tick(300);
    counts.add("b");
    counts.sent("b", 7);
    counts.see(event("join", 14, 13, 8));
    clock.tick(2_000);
    counts.see(event("join", 15, 14, 8)); // unchanged: nothing sent
    clock.tick(2_000);
    expect(sent).to.deep.equal([
      ["a", 7, 0],
      ["a", 8, 1_000],
      ["b", 8, 1_000],
    ]);
  });

  it("takes a read's count only when no event came while it was under way", () => {
    const counts = new CountWatch<string>(() => undefined, 1_000);
    let mark = counts.mark;
    counts.see(event("join", 11, 10, 6));
    counts.read(3, mark);
    expect(counts.count).to.equal(6);
    mark = counts.mark;
    counts.read(4, mark);
    expect(counts.count).to.equal(4);
  });
});

describe("a room's shared snapshot reads", () => {
  const page = (seq: number, members: string[], cursor: string | null): Roster => ({
    room: "r",
    epoch: "e",
    seq,
    count: 3,
    members: members.map((user) => ({
      user,
      connections: 1,
      lastSeen: 1,
      joinedAt: 1,
      typedAt: null,
      leavingAt: null,
      state: null,
    })),
    typing: [],
    at: 1,
    cursor,
  });

  it("gives the callers that ask together one read, and a later caller a read of its own", async () => {
    let reads = 0;
    const shared = new SharedSnapshot(
      () => Promise.resolve([page(++reads, ["a", "b", "c"], null)]),
      () => undefined,
    );
    const together = await Promise.all([1, 2, 3, 4, 5].map(() => shared.next()));
    expect(reads).to.equal(1);
    expect(new Set(together).size).to.equal(1);
    const later = await shared.next();
    expect(reads).to.equal(2);
    expect(later.seq).to.equal(2);
  });

  it("assembles a large room's pages with the events that came between them", async () => {
    const joined = { ...event("join", 11, 10, 3), user: "d" };
    let shared: SharedSnapshot | undefined = undefined;
    shared = new SharedSnapshot(
      () => {
        const first = page(10, ["a", "b"], "b");
        shared!.see(joined);
        return Promise.resolve([first, { ...page(11, ["c", "d"], null), count: 4 }]);
      },
      () => undefined,
    );
    const whole = await shared.next();
    expect(whole.seq).to.equal(11);
    expect(whole.members.map((m) => m.user)).to.deep.equal(["a", "b", "c", "d"]);
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
