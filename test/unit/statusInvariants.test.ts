import { expect } from "chai";
import type { PresenceEvent, StatusChange } from "../../src/index.js";
import { checkStatus, type SettledEnd, type Sighting } from "../kit/invariants.js";

/** What one connection hears: room events and users channel transitions, in order. */
class Heard {
  readonly sightings: Sighting[] = [];
  private roomSeq = 0;
  private readonly roomLast = new Map<string, number>();
  private readonly members = new Map<string, Set<string>>();
  /** Each users channel's last seq. */
  private readonly usersSeq = new Map<number, number>();
  private at = 1_000;

  join(room: string, user: string): void {
    this.membersOf(room).add(user);
    this.event(room, user, "join");
  }

  leave(room: string, user: string): void {
    this.membersOf(room).delete(user);
    this.event(room, user, "leave");
  }

  /** A transition on bucket 0's users channel (another with `bucket`); `heard: false` is lost. */
  status(
    type: "online" | "offline",
    user: string,
    { bucket = 0, epoch = "e1", heard = true } = {},
  ): StatusChange {
    const seq = (this.usersSeq.get(bucket) ?? 0) + 1;
    this.usersSeq.set(bucket, seq);
    const at = ++this.at;
    const base = { v: 2 as const, user, at, epoch, seq, prev: seq - 1 };
    const change: StatusChange =
      type === "online" ? { ...base, type, since: at } : { ...base, type, lastSeenAt: at };
    if (heard) this.sightings.push({ kind: "status", bucket, change });
    return change;
  }

  /** A new epoch that lost the bucket's data: its users channel counts anew. */
  lostData(bucket = 0): void {
    this.usersSeq.delete(bucket);
  }

  lost(): void {
    this.sightings.push({ kind: "lost" });
  }

  private membersOf(room: string): Set<string> {
    const members = this.members.get(room) ?? new Set<string>();
    this.members.set(room, members);
    return members;
  }

  private event(room: string, user: string, type: "join" | "leave"): void {
    const seq = ++this.roomSeq;
    const count = this.membersOf(room).size;
    const base = { v: 2, room, user, at: ++this.at, epoch: "r1", seq, roster: [], count };
    const prev = this.roomLast.get(room) ?? 0;
    const event = (
      type === "join"
        ? { ...base, type, prev, state: null }
        : { ...base, type, prev, reason: "explicit" }
    ) as PresenceEvent;
    if (count === 0) this.roomLast.delete(room);
    else this.roomLast.set(room, seq);
    this.sightings.push({ kind: "event", event });
  }
}

/** Everyone's status as given, `rostered` in some room's roster; users in bucket 0 but `buckets`'. */
function settled(
  online: Record<string, boolean>,
  rostered: string[] = [],
  buckets: Record<string, number> = {},
): SettledEnd {
  return {
    statuses: Object.entries(online).map(([user, on]) => ({
      user,
      online: on,
      since: on ? 1 : null,
      lastSeenAt: null,
    })),
    rostered: new Set(rostered),
    userBucket: (user) => buckets[user] ?? 0,
  };
}

const rules = (sightings: Sighting[], end?: SettledEnd) =>
  checkStatus(sightings, end).violations.map((v) => v.rule);

describe("status checker", () => {
  let heard: Heard;
  beforeEach(() => (heard = new Heard()));

  it("passes alternating transitions heard in full, with exact counts", () => {
    heard.join("lobby", "ann");
    heard.status("online", "ann");
    heard.status("online", "bob", { bucket: 1 });
    heard.leave("lobby", "ann");
    heard.status("offline", "ann");
    heard.status("offline", "bob", { bucket: 1 });

    const end = settled({ ann: false, bob: false, cat: false }, [], { bob: 1 });
    const report = checkStatus(heard.sightings, end);
    expect(report.violations).to.deep.equal([]);
    expect(report.counts).to.deep.equal({
      online: 2,
      offline: 2,
      judged: 4,
      gaps: 0,
      losses: 0,
      early: 0,
      repaired: 0,
      untracked: 0,
      longestEarlyMs: 0,
      endJudged: 3,
    });
  });

  it("flags a user going online twice, or offline twice, in a row", () => {
    heard.status("online", "ann");
    heard.status("online", "ann");
    heard.status("offline", "ann");
    heard.status("offline", "ann");
    expect(rules(heard.sightings)).to.deep.equal(["status", "status"]);
  });

  it("flags a users channel's seq going back within an epoch", () => {
    heard.status("online", "ann");
    const again = heard.status("offline", "ann", { heard: false });
    heard.sightings.push({ kind: "status", bucket: 0, change: again });
    heard.sightings.push({ kind: "status", bucket: 0, change: again });
    expect(rules(heard.sightings)).to.deep.equal(["status"]);
  });

  it("judges nobody it lost track of: a gap, another epoch, a lost connection", () => {
    heard.status("online", "ann");
    heard.status("offline", "ann", { heard: false });
    heard.status("online", "ann", { heard: false });
    heard.status("online", "bob"); // a gap: ann's status unknown, bob's too
    heard.status("offline", "ann");
    heard.status("online", "ann", { epoch: "e2" });
    heard.status("online", "bob", { epoch: "e2" }); // another epoch: unknown
    heard.lost();
    heard.status("online", "ann", { epoch: "e2" }); // after a loss: unknown
    heard.status("online", "cat", { bucket: 3, epoch: "e2", heard: false });
    heard.status("offline", "cat", { bucket: 3, epoch: "e2" }); // a bucket first heard after a loss

    const report = checkStatus(heard.sightings);
    expect(report.violations).to.deep.equal([]);
    expect(report.counts).to.deep.include({ judged: 1, gaps: 1, losses: 1 });
  });

  it("knows everyone offline again where a users channel starts anew (its data lost)", () => {
    heard.status("online", "ann");
    heard.lost();
    heard.lostData();
    heard.status("offline", "ann", { epoch: "e2" }); // offline while offline: nobody was online
    expect(rules(heard.sightings)).to.deep.equal(["status"]);
  });

  it("passes an offline while in a room that an online follows (a drain's lag), measured", () => {
    heard.join("lobby", "ann");
    heard.join("attic", "ann");
    heard.status("online", "ann");
    heard.leave("attic", "ann");
    heard.status("offline", "ann"); // the lobby's change is not applied yet
    heard.status("online", "ann");

    const report = checkStatus(heard.sightings, settled({ ann: true }, ["ann"]));
    expect(report.violations).to.deep.equal([]);
    expect(report.counts).to.deep.include({ early: 1, repaired: 1, longestEarlyMs: 1 });
  });

  it("flags an offline while in a room that no online followed by the end", () => {
    heard.join("lobby", "ann");
    heard.join("attic", "ann");
    heard.status("online", "ann");
    heard.leave("attic", "ann");
    heard.status("offline", "ann");
    heard.leave("lobby", "ann");

    const report = checkStatus(heard.sightings, settled({ ann: false }));
    expect(report.violations.map((v) => [v.rule, v.room])).to.deep.equal([
      ["status-early", "lobby"],
    ]);
    // Without a settled end, the online may still come.
    expect(rules(heard.sightings)).to.deep.equal([]);
  });

  it("does not hold an offline against a room it lost track of, nor against a user lost since", () => {
    heard.join("lobby", "ann");
    heard.status("online", "ann");
    heard.lost(); // the lobby's leave may have been missed
    heard.status("offline", "ann");
    heard.join("attic", "bob");
    heard.status("offline", "bob"); // while in the attic...
    heard.lost(); // ...but the online that followed may be lost

    const report = checkStatus(heard.sightings, settled({ ann: false, bob: false }));
    expect(report.violations).to.deep.equal([]);
    expect(report.counts).to.deep.include({ early: 1, repaired: 0, untracked: 1 });
  });

  it("flags a settled status unlike the rosters, or unlike the last transition heard", () => {
    heard.status("online", "ann");
    heard.status("online", "bob");
    heard.status("online", "cat");
    const end = settled({ ann: true, bob: false, cat: true, dan: true }, ["ann", "bob", "cat"]);

    const report = checkStatus(heard.sightings, end);
    expect(report.violations.map((v) => [v.rule, v.user])).to.deep.equal([
      ["status-end", "bob"], // a roster lists bob, status() says offline
      ["status-end", "bob"], // the last transition heard says online
      ["status-end", "dan"], // no roster lists dan, status() says online
      ["status-end", "dan"], // dan's bucket was heard from its start: offline
    ]);
    expect(report.counts.endJudged).to.equal(4);
  });
});
