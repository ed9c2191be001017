import { expect } from "chai";
import type { PresenceEvent } from "../../src/index.js";
import { audit, type AuditInput, type Logged } from "../kit/audit.js";
import type { CallRecord } from "../kit/invariants.js";

/** The audit the fault suite and the chaos runner share, on hand-made records. */
describe("the fault audit", () => {
  const base = { v: 2 as const, room: "r" };
  /** ann joins, bob joins, bob leaves, ann leaves: one room, one bucket, epoch e1. */
  const chain: PresenceEvent[] = [
    {
      ...base,
      type: "join",
      user: "ann",
      at: 1,
      epoch: "e1",
      seq: 1,
      prev: 0,
      state: null,
      roster: ["ann"],
      count: 1,
    },
    {
      ...base,
      type: "join",
      user: "bob",
      at: 2,
      epoch: "e1",
      seq: 2,
      prev: 1,
      state: null,
      roster: ["ann", "bob"],
      count: 2,
    },
    {
      ...base,
      type: "leave",
      user: "bob",
      at: 3,
      epoch: "e1",
      seq: 3,
      prev: 2,
      reason: "explicit",
      roster: ["ann"],
      count: 1,
    },
    {
      ...base,
      type: "leave",
      user: "ann",
      at: 4,
      epoch: "e1",
      seq: 4,
      prev: 3,
      reason: "expired",
      roster: [],
      count: 0,
    },
  ];
  const entries = (events: PresenceEvent[]): Logged[] =>
    events.map((event) => ({ bucket: 0, id: `${event.at}-0`, event }));
  const joinOfBob: CallRecord = {
    op: "heartbeat",
    room: "r",
    user: "bob",
    result: { joined: true, full: false, event: { epoch: "e1", seq: 2 } },
  };
  const input = (over: Partial<AuditInput> = {}): AuditInput => ({
    handled: entries(chain),
    stored: entries(chain),
    pubsub: chain,
    calls: [joinOfBob],
    bucketOf: () => 0,
    lossAllowed: false,
    ...over,
  });
  const rules = (over: Partial<AuditInput>) => audit(input(over)).violations.map((v) => v.rule);

  it("passes a complete, consistent record, and counts redeliveries apart", () => {
    const result = audit(input({ handled: [...entries(chain), ...entries(chain.slice(1, 2))] }));
    expect(result.violations).to.deep.equal([]);
    expect(result).to.deep.include({ events: 4, epochs: 1, redelivered: 1, duplicates: 0 });
    expect(result).to.deep.include({ pubsubSeen: 4, pubsubMissed: 0, lostFromLog: 0 });
  });

  it("flags a number carried by two different events", () => {
    const other = { ...chain[2]!, type: "join", user: "cid", state: null } as PresenceEvent;
    expect(rules({ pubsub: [...chain.slice(0, 2), other] })).to.include("reuse");
  });

  it("flags an acknowledged write missing from the log, unless the fault may lose it", () => {
    const lost = {
      ...joinOfBob,
      user: "cid",
      result: { joined: true, full: false, event: { epoch: "e1", seq: 5 } },
    };
    expect(rules({ calls: [lost] })).to.include("lost-write");
    const result = audit(input({ calls: [lost], lossAllowed: true }));
    expect(result.violations).to.deep.equal([]);
    expect(result.lostWrites).to.deep.equal([lost]);
    expect(result.unlogged).to.equal(1);
  });

  it("flags a lost entry followed by a kept one of its epoch", () => {
    const stored = entries(chain).filter((l) => l.event.seq !== 3);
    expect(rules({ stored, lossAllowed: true })).to.deep.equal(["lost-midway"]);
    expect(rules({ stored: entries(chain.slice(0, 3)), lossAllowed: true })).to.deep.equal([]);
  });

  it("counts members a data loss left present in a room silent since, when loss is allowed", () => {
    const joins = chain.slice(0, 2);
    expect(rules({ handled: entries(joins), stored: entries(joins), calls: [] })).to.deep.equal([
      "quiet-end",
      "quiet-end",
    ]);
    const result = audit(
      input({ handled: entries(joins), stored: [], calls: [], lossAllowed: true }),
    );
    expect(result.violations).to.deep.equal([]);
    expect(result.stranded).to.equal(2);
  });

  it("flags stored entries the consumer never handled", () => {
    expect(rules({ handled: entries(chain.slice(0, 3)) })).to.include("unread");
  });
});
