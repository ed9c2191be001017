import { expect } from "chai";
import fc from "fast-check";
import { InvalidInputError, type ErrorCode, Rollcall } from "../../src/index.js";
import { id } from "../kit/arbitraries.js";
import { IMMEDIATE, client } from "../kit/redis.js";

async function rejects(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(InvalidInputError);
    expect((error as InvalidInputError).code).to.equal(code);
    return;
  }
  expect.fail(`expected a rejection with ${code}`);
}

describe("validation", () => {
  it("rejects bad ids with a typed error, before anything reaches Redis", async () => {
    const redis = client();
    const rc = new Rollcall(redis, IMMEDIATE);
    const bad: unknown[] = ["", "a\u0000b", "line\nbreak", "tab\t", "\u007f", "\ud800", 42, null];
    bad.push("x".repeat(257));
    for (const value of bad) {
      await rejects(rc.heartbeat(value as string, "u", "c"), "INVALID_ID");
      await rejects(rc.heartbeat("r", value as string, "c"), "INVALID_ID");
      await rejects(rc.heartbeat("r", "u", value as string), "INVALID_ID");
      await rejects(rc.leave("r", value as string, "c"), "INVALID_ID");
      await rejects(rc.startTyping(value as string, "u"), "INVALID_ID");
      await rejects(rc.roster(value as string), "INVALID_ID");
    }
    // Cursors roster() never returns: a shard past the room's shards, and anything else.
    for (const cursor of ["s99:32", "s0:0", "x", ">"]) {
      await rejects(rc.roster("r", { cursor }), "INVALID_OPTION");
    }
    expect(await redis.dbsize()).to.equal(0);
    const stats = await redis.info("commandstats");
    expect(stats).not.to.match(/cmdstat_eval/);
  });

  it("rejects bad member state with a typed error and keeps the stored one", async () => {
    const redis = client();
    const rc = new Rollcall(redis, { ...IMMEDIATE, maxStateBytes: 64 });
    await rc.heartbeat("r", "u", "c", { state: { status: "online" } });
    const bad: unknown[] = [
      [1, 2],
      "online",
      null,
      { n: NaN },
      { n: Infinity },
      { f: () => 1 },
      { d: new Date(0) },
      { big: 1n },
      { u: undefined },
      { long: "x".repeat(64) },
      { deep: [[[[[[[[[[1]]]]]]]]]] },
      // eslint-disable-next-line no-sparse-arrays -- the hole is the point
      { tags: [1, , 3] },
      Object.defineProperty({}, "status", {
        enumerable: true,
        get: () => {
          throw new Error("a getter that throws");
        },
      }),
    ];
    for (const state of bad) {
      await rejects(rc.setState("r", "u", state as never), "INVALID_STATE");
      await rejects(rc.heartbeat("r", "u", "c", { state: state as never }), "INVALID_STATE");
    }
    expect((await rc.roster("r")).members[0]!.state).to.deep.equal({ status: "online" });
    // No options at all, even a null from plain JavaScript, keeps the state.
    expect((await rc.heartbeat("r", "u", "c", null as never)).joined).to.equal(false);
    expect((await rc.roster("r")).members[0]!.state).to.deep.equal({ status: "online" });
  });

  it("never lets distinct (room, user, connection) ids share a member or a connection", async () => {
    // One bucket, so every room shares the same keys and only the encoding keeps them apart.
    const rc = new Rollcall(client(), { ...IMMEDIATE, buckets: 1 });
    const redis = rc.redis;
    await fc.assert(
      fc.asyncProperty(fc.tuple(id, id, id), fc.tuple(id, id, id), async (a, b) => {
        fc.pre(a.join("|") !== b.join("|"));
        await redis.flushall();
        await rc.heartbeat(...a);
        const second = await rc.heartbeat(...b);
        const sameMember = a[0] === b[0] && a[1] === b[1];
        // A different member joins; the same member on another connection does not.
        expect(second.joined).to.equal(!sameMember);
        const rosterA = await rc.roster(a[0]);
        const expected = sameMember ? [[a[1], 2]] : a[0] === b[0] ? null : [[a[1], 1]];
        if (expected) {
          expect(rosterA.members.map((m) => [m.user, m.connections])).to.deep.equal(expected);
        } else {
          expect(rosterA.members.map((m) => m.user).sort()).to.deep.equal([a[1], b[1]].sort());
        }
      }),
      { numRuns: 150 },
    );
  });
});
