import { expect } from "chai";
import type { LeaveEvent, PresenceEvent, TypingStopEvent } from "../../src/index.js";
import { History, type CallRecord, type Report } from "../kit/invariants.js";

const ROOM = "lobby";

/** What distinguishes an event of each type: the rest the bucket fills in. */
type Fields<E = PresenceEvent> = E extends PresenceEvent
  ? Omit<E, "v" | "room" | "at" | "epoch" | "seq" | "prev" | "log">
  : never;
/** Bends one event away from what the engine publishes; `lost`: no observer receives it. */
type Over = Partial<Pick<PresenceEvent, "room" | "epoch" | "seq" | "prev">> & {
  count?: number;
  lost?: boolean;
};

/** Publishes events the way one bucket of the engine would, to the given observers. */
class Bucket {
  private seq = 0;
  private epoch = "e1";
  /** Each non-empty room's last seq: the next event's prev. */
  private readonly last = new Map<string, number>();
  private readonly members = new Map<string, Set<string>>();

  constructor(
    private readonly history: History,
    private readonly sources = ["subscriber"],
  ) {}

  join(user: string, over: Over = {}) {
    const count = this.membersOf(over.room).add(user).size;
    return this.publish({ type: "join", user, state: null, roster: [], count }, over);
  }

  leave(user: string, over: Over = {}, reason: LeaveEvent["reason"] = "explicit") {
    const members = this.membersOf(over.room);
    members.delete(user);
    return this.publish({ type: "leave", user, reason, roster: [], count: members.size }, over);
  }

  typingStart(user: string, over: Over = {}) {
    return this.publish({ type: "typing-start", user }, over);
  }

  typingStop(user: string, over: Over = {}, reason: TypingStopEvent["reason"] = "explicit") {
    return this.publish({ type: "typing-stop", user, reason }, over);
  }

  update(user: string, over: Over = {}) {
    return this.publish({ type: "update", user, state: { status: "away" } }, over);
  }

  /** A new epoch: after a restart that lost the data, or a failover that kept it. */
  newEpoch(epoch: string, { lost }: { lost: boolean }): void {
    this.epoch = epoch;
    if (!lost) return;
    this.seq = 0;
    this.last.clear();
    this.members.clear();
  }

  private membersOf(room = ROOM): Set<string> {
    const members = this.members.get(room) ?? new Set<string>();
    this.members.set(room, members);
    return members;
  }

  private publish(fields: Fields, { lost, ...over }: Over): PresenceEvent {
    const room = over.room ?? ROOM;
    const seq = ++this.seq;
    const base = { v: 2, room, at: seq, epoch: this.epoch, seq, prev: this.last.get(room) ?? 0 };
    const event = { ...base, ...fields, ...over } as PresenceEvent;
    if (fields.type === "leave" && fields.count === 0) this.last.delete(room);
    else this.last.set(room, event.seq);
    if (!lost) for (const source of this.sources) this.history.addEvent(event, source);
    return event;
  }
}

/** The call that published `e`, with the reply the engine gives it. */
function callOf(e: PresenceEvent): CallRecord {
  const at = { room: e.room, user: e.user };
  const event = { epoch: e.epoch, seq: e.seq };
  switch (e.type) {
    case "join":
      return { ...at, op: "heartbeat", result: { joined: true, full: false, event } };
    case "leave":
      return { ...at, op: "leave", result: { removed: true, left: true, leaving: false, event } };
    case "typing-start":
      return { ...at, op: "startTyping", result: { present: true, started: true, event } };
    case "typing-stop":
      return { ...at, op: "stopTyping", result: { stopped: true, event } };
    case "update":
      return { ...at, op: "setState", result: { present: true, updated: true, event } };
  }
}

const at = (user: string) => ({ room: ROOM, user });
const rules = (report: Report) => report.violations.map((v) => v.rule);

describe("invariant checker", () => {
  let history: History;
  let bucket: Bucket;
  beforeEach(() => {
    history = new History();
    bucket = new Bucket(history);
  });

  it("passes a clean history seen by the log and a subscriber, with exact counts", () => {
    bucket = new Bucket(history, ["log", "subscriber"]);
    const published = [
      bucket.join("ann"),
      bucket.join("bob"),
      bucket.join("cat", { room: "kitchen" }),
      bucket.typingStart("ann"),
      bucket.update("bob"),
      bucket.typingStop("ann"),
      bucket.typingStart("bob"),
      bucket.leave("cat", { room: "kitchen" }),
      bucket.typingStop("bob", {}, "left"),
      bucket.leave("bob", {}, "expired"),
      bucket.leave("ann"),
      bucket.join("ann"),
      bucket.leave("ann"),
    ];
    // Expiries and the stop that goes with a leave come from no call of their own.
    const explicit = (e: PresenceEvent) => !("reason" in e) || e.reason === "explicit";
    for (const e of published.filter(explicit)) history.addCall(callOf(e));
    history.addCall({
      ...at("ann"),
      op: "heartbeat",
      result: { joined: false, full: false, event: null },
    });

    const report = history.check({ complete: true, quiet: true });
    expect(report.violations).to.deep.equal([]);
    expect(report).to.deep.include({ events: 13, calls: 12 });
    expect(report.counts).to.deep.equal({
      joins: 4,
      leaves: 4,
      typingStarts: 2,
      typingStops: 2,
      updates: 1,
      duplicates: 0,
      epochs: 1,
      gaps: 0,
    });
  });

  describe("presence alternation", () => {
    it("flags a double join", () => {
      bucket.join("ann");
      bucket.join("ann");
      expect(history.check().violations).to.deep.include({
        rule: "presence",
        room: ROOM,
        user: "ann",
        source: "subscriber",
        detail: "join of ann #2 (prev 1) while present",
      });
    });

    it("flags a leave without a join", () => {
      bucket.join("ann");
      bucket.leave("bob");
      expect(rules(history.check())).to.include("presence");
    });

    it("flags an update from a user not present", () => {
      bucket.join("ann");
      bucket.update("bob");
      expect(rules(history.check())).to.deep.equal(["presence"]);
    });

    it("restarts at an epoch change: Redis lost the data and the user joins again", () => {
      bucket.join("ann");
      bucket.newEpoch("e2", { lost: true });
      bucket.join("ann");
      bucket.leave("ann");
      const report = history.check({ complete: true });
      expect(report.violations).to.deep.equal([]);
      expect(report.counts).to.include({ epochs: 2, gaps: 0 });
    });

    it("accepts any prev on a new epoch's first event: a failover kept the data", () => {
      bucket.join("ann");
      bucket.join("bob");
      bucket.newEpoch("e2", { lost: false });
      bucket.leave("ann", { seq: 1 }); // the new primary's counter lags: prev 2 names an e1 event
      bucket.leave("bob", { seq: 2 });
      expect(history.check({ complete: true, quiet: true }).violations).to.deep.equal([]);
    });
  });

  describe("typing", () => {
    it("flags typing without presence", () => {
      bucket.join("ann");
      bucket.typingStart("bob");
      expect(rules(history.check())).to.deep.equal(["typing-presence"]);
    });

    it("flags a leave while typing: the engine stops typing first", () => {
      bucket.join("ann");
      bucket.typingStart("ann");
      bucket.leave("ann");
      expect(rules(history.check())).to.deep.equal(["typing-presence"]);
    });

    it("flags a typing-start twice and a typing-stop without a start", () => {
      bucket.join("ann");
      bucket.typingStart("ann");
      bucket.typingStart("ann");
      bucket.typingStop("ann");
      bucket.typingStop("ann");
      expect(rules(history.check())).to.deep.equal(["typing", "typing"]);
    });
  });

  describe("chains", () => {
    it("flags a prev that does not name the room's previous event", () => {
      bucket.join("ann");
      bucket.join("bob");
      bucket.join("cat", { prev: 1 });
      expect(history.check().violations).to.deep.equal([
        {
          rule: "prev",
          room: ROOM,
          user: "cat",
          source: "subscriber",
          detail: "join of cat #3 (prev 1) after #2: expected prev 2",
        },
      ]);
    });

    it("flags a chain restarting at 0 while members remain, in a complete log", () => {
      bucket.join("ann");
      bucket.join("bob", { prev: 0, count: 1 });
      expect(rules(history.check({ complete: true }))).to.deep.equal(["prev"]);
    });

    it("flags a seq going back within an epoch", () => {
      bucket.join("ann");
      bucket.join("cat", { room: "kitchen" });
      bucket.join("bob");
      bucket.join("dan", { seq: 2 }); // the bucket's counter went back: #2 was the kitchen's
      expect(history.check().violations).to.deep.equal([
        {
          rule: "seq-order",
          room: ROOM,
          user: "dan",
          source: "subscriber",
          detail: "join of dan #2 (prev 3) after #3 in e1",
        },
      ]);
    });

    it("flags a seq reused by another event of the room", () => {
      bucket.join("ann");
      bucket.join("bob", { seq: 1 });
      expect(rules(history.check())).to.deep.equal(["seq-order"]);
    });

    it("counts a subscriber's gap without flagging it, and resyncs past it", () => {
      bucket.join("ann");
      bucket.join("bob", { lost: true });
      bucket.leave("ann"); // its prev names the join the subscriber missed
      bucket.leave("bob", { lost: true });
      bucket.join("ann"); // prev 0 after a join: the emptying leave was missed
      bucket.leave("ann");
      const report = history.check({ quiet: true });
      expect(report.violations).to.deep.equal([]);
      expect(report.counts).to.include({ gaps: 2, joins: 2, leaves: 2 });
    });

    it("flags the same gap in a complete log", () => {
      bucket.join("ann");
      bucket.join("bob", { lost: true });
      bucket.leave("ann");
      const report = history.check({ complete: true });
      expect(rules(report)).to.deep.equal(["gap"]);
      expect(report.counts.gaps).to.equal(1);
    });

    it("counts a room first seen mid-chain as a gap", () => {
      bucket.join("ann", { lost: true });
      bucket.join("bob");
      const report = history.check();
      expect(report.violations).to.deep.equal([]);
      expect(report.counts.gaps).to.equal(1);
    });

    it("holds only the listed sources to completeness", () => {
      bucket = new Bucket(history, ["log"]);
      const lossy = new Bucket(history, ["subscriber"]);
      for (const b of [bucket, lossy]) b.join("ann");
      bucket.join("bob");
      lossy.join("bob", { lost: true });
      for (const b of [bucket, lossy]) b.leave("ann");
      const report = history.check({ complete: ["log"] });
      expect(report.violations).to.deep.equal([]);
      expect(report.counts.gaps).to.equal(1);
    });
  });

  describe("duplicates", () => {
    it("flags and counts a duplicate in the log", () => {
      const join = new Bucket(history, ["log"]).join("ann");
      history.addEvent(join, "log");
      const report = history.check({ complete: true });
      expect(report.violations).to.deep.equal([
        {
          rule: "duplicate",
          room: ROOM,
          user: "ann",
          source: "log",
          detail: "join of ann #1 (prev 0) in e1 seen again",
        },
      ]);
      expect(report.counts.duplicates).to.equal(1);
      expect(report.events).to.equal(1);
    });

    it("flags a duplicate delivery to a subscriber, but not one event seen by two sources", () => {
      const join = new Bucket(history, ["log", "subscriber"]).join("ann");
      history.addEvent(join, "subscriber");
      const report = history.check();
      expect(report.violations.map((v) => [v.rule, v.source])).to.deep.equal([
        ["duplicate", "subscriber"],
      ]);
      expect(report.counts).to.include({ duplicates: 1, joins: 1 });
    });
  });

  describe("counts", () => {
    it("flags a join or leave whose count is not the replayed membership", () => {
      bucket.join("ann");
      bucket.join("bob", { count: 3 });
      bucket.leave("ann", { count: 0 });
      expect(rules(history.check())).to.deep.equal(["count", "count"]);
    });

    it("does not judge counts once the chain broke", () => {
      bucket.join("ann");
      bucket.join("bob", { lost: true });
      bucket.join("cat", { count: 7 });
      expect(history.check().violations).to.deep.equal([]);
    });
  });

  describe("calls", () => {
    it("flags a call naming an event that was never published, when the log is complete", () => {
      const join = bucket.join("ann");
      history.addCall(callOf({ ...join, seq: 99 }));
      expect(history.check().violations).to.deep.equal([]);
      expect(history.check({ complete: true }).violations).to.deep.equal([
        {
          rule: "call-event",
          room: ROOM,
          user: "ann",
          detail: "heartbeat: names #99 in e1, never published",
        },
      ]);
    });

    it("flags a call naming an event the complete log lacks, though a subscriber saw it", () => {
      const join = new Bucket(history, ["subscriber"]).join("ann");
      history.addCall(callOf(join));
      expect(rules(history.check({ complete: ["log"] }))).to.deep.equal(["call-event"]);
    });

    it("flags a call naming an event of another type, user or reason", () => {
      bucket.join("ann");
      bucket.join("bob");
      const start = bucket.typingStart("ann");
      const stop = bucket.typingStop("ann", {}, "left");
      const event = { epoch: "e1", seq: 1 };
      history.addCall({
        ...at("ann"),
        op: "setState",
        result: { present: true, updated: true, event },
      });
      history.addCall({ ...callOf(start), user: "bob" });
      history.addCall(callOf(stop));
      expect(history.check().violations.map((v) => v.detail)).to.deep.equal([
        "setState: expected update of ann, names join of ann #1 (prev 0)",
        "startTyping: expected typing-start of bob, names typing-start of ann #3 (prev 2)",
        "stopTyping: expected typing-stop (explicit) of ann, names typing-stop of ann #4 (prev 3)",
      ]);
    });

    it("flags a result whose flags and event disagree", () => {
      bucket.join("ann");
      const event = { epoch: "e1", seq: 1 };
      history.addCall({
        ...at("ann"),
        op: "heartbeat",
        result: { joined: true, full: false, event: null },
      });
      history.addCall({
        ...at("ann"),
        op: "leave",
        result: { removed: true, left: false, leaving: false, event },
      });
      expect(rules(history.check())).to.deep.equal(["call-result", "call-result"]);
    });

    it("flags two calls claiming one event: a reply repeated after a resend", () => {
      bucket.join("ann");
      const leave = bucket.leave("ann");
      history.addCall(callOf(leave));
      history.addCall(callOf(leave));
      expect(history.check({ complete: true }).violations).to.deep.equal([
        { rule: "double-claim", room: ROOM, user: "ann", detail: "leave: #2 claimed again" },
      ]);
    });
  });

  describe("quiet end", () => {
    it("flags members and typists left over, only when asked", () => {
      bucket.join("ann");
      bucket.join("bob");
      bucket.typingStart("bob");
      bucket.leave("ann");
      expect(history.check().violations).to.deep.equal([]);
      expect(
        history.check({ quiet: true }).violations.map((v) => [v.rule, v.user, v.detail]),
      ).to.deep.equal([
        ["quiet-end", "bob", "still present at the end"],
        ["quiet-end", "bob", "still typing at the end"],
      ]);
    });

    it("does not judge users an epoch change made unknown", () => {
      bucket.join("ann");
      bucket.newEpoch("e2", { lost: true });
      bucket.join("bob");
      bucket.leave("bob");
      expect(history.check({ quiet: true, complete: true }).violations).to.deep.equal([]);
    });
  });
});
