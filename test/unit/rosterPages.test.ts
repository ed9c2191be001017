import { expect } from "chai";
import { RedisCallError } from "../../src/engine/errors.js";
import { readPages, type Roster } from "../../src/engine/scripts/roster.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { assemble } from "../../src/protocol/replica.js";

/** A page of room "r" listing `users` (a typist when its name starts with t). */
function page(
  seq: number,
  count: number,
  users: string[],
  cursor: string | null,
  epoch = "e",
): Roster {
  const members = users.map((user) => ({
    user,
    connections: 1,
    lastSeen: 1,
    joinedAt: 1,
    typedAt: user.startsWith("t") ? 1 : null,
    leavingAt: null,
    state: null,
  }));
  const typing = users.filter((u) => u.startsWith("t"));
  return { room: "r", epoch, seq, count, members, typing, at: 1, cursor };
}

/** A page reader that answers each read of the room with the next run of pages. */
function reads(...runs: Roster[][]) {
  const asked: string[] = [];
  let run = -1;
  const read = (cursor: string) => {
    asked.push(cursor);
    if (cursor === "") run += 1;
    const pages = runs[run]!;
    return Promise.resolve(pages[cursor === "" ? 0 : Number(cursor)]!);
  };
  return { read, asked };
}

describe("a room read in pages (readPages)", () => {
  it("lists a member that two pages list on the last of them only, typing included", async () => {
    const { read } = reads([
      page(5, 4, ["a", "ta"], "1"),
      page(5, 4, ["a", "b"], "2"), // started over: a again
      page(5, 4, ["ta", "c"], null),
    ]);
    const pages = await readPages(read);
    expect(pages.map((p) => p.members.map((m) => m.user))).to.deep.equal([
      [],
      ["a", "b"],
      ["ta", "c"],
    ]);
    expect(pages.map((p) => p.typing)).to.deep.equal([[], [], ["ta"]]);
    expect(pages.map((p) => p.cursor)).to.deep.equal(["1", "2", null]);
  });

  it("reads the room again when its pages span two epochs, and stops at the page of the new one", async () => {
    const { read, asked } = reads(
      [page(5, 3, ["a", "b"], "1"), page(1, 3, ["a", "b", "c"], "2", "e2")],
      [page(2, 3, ["a", "b"], "1", "e2"), page(2, 3, ["c"], null, "e2")],
    );
    const pages = await readPages(read);
    expect(asked).to.deep.equal(["", "1", "", "1"]);
    expect(pages.map((p) => p.epoch)).to.deep.equal(["e2", "e2"]);
  });

  it("reads it again when pages of one seq do not list its count, and says so after three reads", async () => {
    const short = [page(5, 4, ["a", "b"], "1"), page(5, 4, ["c"], null)];
    const { read, asked } = reads(short, short, short);
    const failure = await readPages(read).catch((error: unknown) => error);
    expect(failure).to.be.instanceOf(RedisCallError);
    expect((failure as RedisCallError).message).to.include(
      "listed 3 members at seq 5, where the room counts 4",
    );
    expect(asked.filter((c) => c === "")).to.have.length(3);
    const { read: later } = reads(short, [
      page(5, 4, ["a", "b"], "1"),
      page(5, 4, ["c", "d"], null),
    ]);
    expect((await readPages(later)).flatMap((p) => p.members)).to.have.length(4);
  });

  it("gives pages of several seqs as they are, each consistent with its own", async () => {
    const { read } = reads([page(5, 4, ["a", "b"], "1"), page(7, 5, ["c", "d", "e"], null)]);
    expect((await readPages(read)).map((p) => [p.seq, p.members.length])).to.deep.equal([
      [5, 2],
      [7, 3],
    ]);
  });
});

describe("assembling pages", () => {
  const join = (user: string, seq: number, prev: number, count: number): PresenceEvent => ({
    v: 2,
    type: "join",
    room: "r",
    user,
    at: 1,
    epoch: "e",
    seq,
    prev,
    state: null,
    roster: [],
    count,
  });

  it("makes no roster of pages whose members, with the events between them, miss the count", () => {
    // x joined at 6 in the first page's part: a, b, c and x make the 4 the second page counts.
    const first = page(5, 3, ["a", "b"], "1");
    const whole = assemble([first, page(6, 4, ["c"], null)], [join("x", 6, 5, 4)]);
    expect(whole?.members.map((m) => m.user)).to.deep.equal(["a", "b", "c", "x"]);
    // Counting 5, the room holds a member no page listed: no roster.
    expect(assemble([first, page(6, 5, ["c"], null)], [join("x", 6, 5, 5)])).to.equal(null);
  });
});
