import { expect } from "chai";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { assemble, Replica, type Snapshot } from "../../src/protocol/replica.js";

const EPOCH = "e1";
let at = 1_000;

/** Events of room "r" in epoch e1 unless told otherwise, numbered by the caller. */
function join(
  user: string,
  seq: number,
  prev: number,
  count: number,
  epoch = EPOCH,
): PresenceEvent {
  return {
    v: 2,
    type: "join",
    room: "r",
    user,
    at: ++at,
    epoch,
    seq,
    prev,
    state: null,
    roster: [],
    count,
  };
}
function leave(user: string, seq: number, prev: number, count: number): PresenceEvent {
  const base = { v: 2, room: "r", user, at: ++at, epoch: EPOCH, seq, prev } as const;
  return { ...base, type: "leave", reason: "explicit", roster: [], count };
}
function typing(user: string, seq: number, prev: number, on: boolean): PresenceEvent {
  const base = { v: 2, room: "r", user, at: ++at, epoch: EPOCH, seq, prev } as const;
  return on
    ? { ...base, type: "typing-start" }
    : { ...base, type: "typing-stop", reason: "explicit" };
}
function update(user: string, seq: number, prev: number, state: { s: number }): PresenceEvent {
  return { v: 2, type: "update", room: "r", user, at: ++at, epoch: EPOCH, seq, prev, state };
}
function snapshot(seq: number, users: string[], typing: string[] = [], epoch = EPOCH): Snapshot {
  const members = users.map((user) => ({ user, joinedAt: 1, state: null }));
  return { room: "r", epoch, seq, count: users.length, members, typing };
}
const users = (r: Replica) => r.roster.members.map((m) => m.user);
const changes = (outcome: { changes: readonly { type: string; user: string }[] }) =>
  outcome.changes.map((c) => `${c.type}:${c.user}`);

describe("the replica", () => {
  it("holds events until its first snapshot, then applies those that follow it", () => {
    const r = new Replica("r");
    expect(r.holding).to.equal(true);
    expect(r.receive(join("bob", 6, 5, 2)).changes).to.deep.equal([]);
    expect(r.receive(join("cy", 7, 6, 3)).changes).to.deep.equal([]);
    const outcome = r.install(snapshot(6, ["ann", "bob"]));
    expect(outcome.resync).to.equal(false);
    // ann and bob come from the snapshot, cy from the held event the snapshot did not cover.
    expect(changes(outcome)).to.deep.equal(["join:ann", "join:bob", "join:cy"]);
    expect(users(r)).to.deep.equal(["ann", "bob", "cy"]);
    expect(r.roster).to.include({ seq: 7, count: 3, epoch: EPOCH });
  });

  it("applies a chain of events and ignores one it has already applied", () => {
    const r = new Replica("r");
    r.install(snapshot(10, []));
    expect(changes(r.receive(join("ann", 11, 0, 1)))).to.deep.equal(["join:ann"]);
    expect(changes(r.receive(typing("ann", 12, 11, true)))).to.deep.equal(["typing-start:ann"]);
    expect(r.roster.typing).to.deep.equal(["ann"]);
    const updated = update("ann", 13, 12, { s: 1 });
    expect(changes(r.receive(updated))).to.deep.equal(["update:ann"]);
    expect(r.receive({ ...updated })).to.deep.equal({ changes: [], resync: false });
    expect(r.roster.members[0]!.state).to.deep.equal({ s: 1 });
    expect(changes(r.receive(leave("ann", 14, 13, 0)))).to.deep.equal(["leave:ann"]);
    expect(r.roster).to.include({ seq: 14, count: 0 });
    expect(r.roster.typing).to.deep.equal([]);
    // The room emptied: a new chain starts at prev 0.
    expect(changes(r.receive(join("bob", 20, 0, 1)))).to.deep.equal(["join:bob"]);
  });

  it("asks for a snapshot at a gap, holds what follows, and reports what it missed", () => {
    const r = new Replica("r");
    r.install(snapshot(5, ["ann"], ["ann"]));
    const gap = r.receive(join("cy", 8, 7, 3));
    expect(gap).to.deep.equal({ changes: [], resync: true });
    expect(r.holding).to.equal(true);
    expect(r.receive(leave("cy", 9, 8, 2)).changes).to.deep.equal([]);
    const outcome = r.install(snapshot(9, ["bob"]));
    expect(outcome.resync).to.equal(false);
    expect(changes(outcome)).to.deep.equal(["typing-stop:ann", "leave:ann", "join:bob"]);
    expect(users(r)).to.deep.equal(["bob"]);
  });

  it("treats an event of another epoch as a gap, even one that would otherwise follow", () => {
    const r = new Replica("r");
    r.install(snapshot(5, ["ann"]));
    expect(r.receive(join("bob", 3, 2, 2, "e2")).resync).to.equal(true);
    r.receive(join("cy", 4, 3, 3)); // a late event of the old epoch, held with the first
    const outcome = r.install(snapshot(3, ["ann", "bob"], [], "e2"));
    // The held events of e1 are history: the snapshot of e2 shows where they led.
    expect(outcome.resync).to.equal(false);
    expect(changes(outcome)).to.deep.equal(["join:bob"]);
    expect(r.roster).to.include({ epoch: "e2", seq: 3 });
    // In the new epoch, smaller numbers than the old epoch's are new events.
    const bobLeaves = { ...leave("bob", 4, 3, 1), epoch: "e2" };
    expect(changes(r.receive(bobLeaves))).to.deep.equal(["leave:bob"]);
    // A late event of the old epoch, applied in the new one, is a gap: never a continuation.
    expect(r.receive(join("dan", 5, 4, 2)).resync).to.equal(true);
  });

  it("follows an empty room read before its bucket had an epoch into the first one, and no other", () => {
    const r = new Replica("r");
    r.install(snapshot(0, [], [], ""));
    expect(changes(r.receive(join("ann", 1, 0, 1, "e2")))).to.deep.equal(["join:ann"]);
    expect(r.roster).to.include({ epoch: "e2", seq: 1 });
    expect(r.receive(join("bob", 2, 1, 2, "e3")).resync, "then another epoch").to.equal(true);
    // Only an empty room's chain starts so, and only at its start.
    const full = new Replica("r");
    full.install(snapshot(0, ["ann"], [], ""));
    expect(full.receive(join("bob", 1, 0, 2, "e2")).resync).to.equal(true);
    const late = new Replica("r");
    late.install(snapshot(0, [], [], ""));
    expect(late.receive(join("bob", 2, 1, 2, "e2")).resync).to.equal(true);
  });

  it("finds a gap among the held events after a snapshot, and holds the rest again", () => {
    const r = new Replica("r");
    r.receive(join("bob", 6, 5, 2));
    r.receive(join("dan", 9, 8, 4));
    r.receive(leave("dan", 10, 9, 3));
    const outcome = r.install(snapshot(6, ["ann", "bob"]));
    expect(outcome.resync).to.equal(true);
    expect(r.holding).to.equal(true);
    const next = r.install(snapshot(10, ["ann", "bob", "cy"]));
    expect(next.resync).to.equal(false);
    expect(changes(next)).to.deep.equal(["join:cy"]);
  });

  it("resyncs on an event that takes a number already applied with other content", () => {
    const r = new Replica("r");
    r.install(snapshot(10, ["ann"]));
    // Not rollcall's: it takes the number of the next real event, which then comes.
    expect(changes(r.receive(join("phantom", 11, 10, 2)))).to.deep.equal(["join:phantom"]);
    expect(r.receive(join("bob", 11, 10, 2))).to.deep.equal({ changes: [], resync: true });
    r.requestSnapshot();
    const outcome = r.install(snapshot(11, ["ann", "bob"]));
    expect(changes(outcome)).to.deep.equal(["leave:phantom", "join:bob"]);
    expect(r.holding).to.equal(false);
  });

  it("comes back below a huge number a message claimed, at the next real event", () => {
    const r = new Replica("r");
    r.install(snapshot(10, ["ann"]));
    r.receive(typing("ann", 1e15, 10, true)); // it follows, so it is applied
    expect(r.receive(join("bob", 11, 10, 2)).resync).to.equal(true); // no silence
    r.requestSnapshot();
    r.install(snapshot(11, ["ann", "bob"]));
    expect(r.roster.seq).to.equal(11);
    expect(changes(r.receive(leave("bob", 12, 11, 1)))).to.deep.equal(["leave:bob"]);
  });

  it("drops a held event that does not fit a snapshot asked for after it: one resync per message", () => {
    const r = new Replica("r");
    r.install(snapshot(10, ["ann"]));
    expect(r.receive(join("ghost", 500, 499, 2)).resync).to.equal(true);
    r.receive(join("ghost2", 600, 599, 2)); // held while the resync runs
    r.requestSnapshot();
    r.receive(join("bob", 11, 10, 2)); // published after the snapshot was read: it follows
    const outcome = r.install(snapshot(10, ["ann"]));
    expect(outcome.resync).to.equal(false);
    expect(changes(outcome)).to.deep.equal(["join:bob"]);
    expect(r.holding).to.equal(false);
  });

  it("tells a user who left and came back while events were missed by their join time", () => {
    const r = new Replica("r");
    r.install(snapshot(5, ["ann"]));
    r.hold();
    const again = { ...snapshot(9, ["ann"]), members: [{ user: "ann", joinedAt: 2, state: null }] };
    expect(changes(r.install(again))).to.deep.equal(["leave:ann", "join:ann"]);
  });

  it("orders members by the UTF-8 bytes of their ids, as Redis does", () => {
    const r = new Replica("r");
    const ids = ["b", "a", "\u{1F600}", "\uFF5E", "Z", "é"];
    r.install(snapshot(1, ids));
    const bytes = (s: string) => [...new TextEncoder().encode(s)].map((b) => b + 1000).join();
    const expected = [...ids].sort((x, y) => (bytes(x) < bytes(y) ? -1 : 1));
    expect(users(r)).to.deep.equal(expected);
    expect(users(r)).to.deep.equal(["Z", "a", "b", "é", "\uFF5E", "\u{1F600}"]);
  });
});

describe("a roster read in pages", () => {
  /** A page at `seq` listing `users` (count: the room's members then). */
  const page = (seq: number, count: number, listed: string[], typists: string[] = []) => ({
    ...snapshot(seq, listed, typists),
    count,
  });

  it("is the pages' union when every page has one seq", () => {
    const whole = assemble([page(5, 4, ["a", "b"]), page(5, 4, ["c", "d"], ["d"])], []);
    expect(whole?.members.map((m) => m.user)).to.deep.equal(["a", "b", "c", "d"]);
    expect(whole).to.include({ seq: 5, count: 4 });
    expect(whole?.typing).to.deep.equal(["d"]);
  });

  it("brings each member to the last page's seq with its events after its own page's", () => {
    // Page 1 at 5 lists a, b; then b leaves (6), e joins (7), a types (8); page 2 at 8 lists c,
    // d and e (e came in d's part of the room, after page 1).
    const events = [leave("b", 6, 5, 3), join("e", 7, 6, 4), typing("a", 8, 7, true)];
    const whole = assemble([page(5, 4, ["a", "b"]), page(8, 4, ["c", "d", "e"])], events);
    expect(whole?.members.map((m) => m.user)).to.deep.equal(["a", "c", "d", "e"]);
    expect(whole).to.include({ seq: 8, count: 4 });
    expect(whole?.typing).to.deep.equal(["a"]);
  });

  it("settles a member no page listed with its events, and one listed late by its page alone", () => {
    // x joined at 6 in page 1's part (after it was read): no page lists x. y left at 7 in page
    // 2's part before it was read: listed nowhere. z joined at 6 and is listed by page 2 (at 7).
    const events = [join("x", 6, 5, 3), leave("y", 7, 6, 2)];
    const whole = assemble(
      [page(5, 2, ["a"]), page(7, 3, ["z"])],
      [...events, join("z", 6, 5, 3)].filter((e) => e.user !== "z"),
    );
    expect(whole?.members.map((m) => m.user)).to.deep.equal(["a", "x", "z"]);
  });

  it("says it cannot when the events between the pages have a gap, or the pages span epochs", () => {
    const pages = [page(5, 2, ["a"]), page(8, 2, ["b"])];
    expect(assemble(pages, [join("c", 6, 5, 3), leave("c", 8, 7, 2)])).to.equal(null);
    expect(assemble([page(5, 1, ["a"]), { ...page(5, 1, ["b"]), epoch: "e2" }], [])).to.equal(null);
  });

  it("installs into a replica with the events it held, and resyncs when they fall short", () => {
    const r = new Replica("r");
    r.requestSnapshot();
    r.receive(join("e", 7, 6, 4));
    r.receive(leave("b", 6, 5, 3));
    r.receive(typing("e", 9, 8, true)); // 8 was missed: after the pages, a gap
    const outcome = r.installPages([page(5, 4, ["a", "b"]), page(7, 4, ["c", "d", "e"])]);
    expect(users(r)).to.deep.equal(["a", "c", "d", "e"]);
    expect(r.roster.seq).to.equal(7);
    expect(outcome.resync).to.equal(true);
    const short = new Replica("r");
    short.requestSnapshot();
    expect(short.installPages([page(5, 2, ["a"]), page(8, 2, ["b"])]).resync).to.equal(true);
    expect(short.holding).to.equal(true);
  });
});
