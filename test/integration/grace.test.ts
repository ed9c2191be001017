import { expect } from "chai";
import type { Redis } from "ioredis";
import { Rollcall, Sweeper, type PresenceEvent } from "../../src/index.js";
import { History } from "../kit/invariants.js";
import { closeGateways, connect, startGateway, SHORT } from "../kit/gateway.js";
import { caughtUp, client, IMMEDIATE, listen, redisNow } from "../kit/redis.js";
import { advanceClock, stopClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";

const GRACE = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 5_000, leaveGraceMs: 500 };
const summary = (events: PresenceEvent[]) =>
  events.map((e) => ("reason" in e ? `${e.type}:${e.user}:${e.reason}` : `${e.type}:${e.user}`));

describe("the leave grace", () => {
  it("announces a clean leave only when the grace ends, with the typing stopped at once", async () => {
    const rc = new Rollcall(client(), GRACE);
    const events = await listen([rc.channel("room")]);
    await rc.heartbeat("room", "ann", "tab");
    await rc.startTyping("room", "ann");
    expect(await rc.leave("room", "ann", "tab")).to.deep.include({
      removed: true,
      left: false,
      leaving: true,
    });
    await eventually(() => events.length === 3);
    expect(summary(events)).to.deep.equal(["join:ann", "typing-start:ann", "typing-stop:ann:left"]);
    const [ann] = (await rc.roster("room")).members;
    expect(ann).to.deep.include({ user: "ann", connections: 0, typedAt: null });
    expect(ann!.leavingAt).to.be.a("number");
    expect((await rc.startTyping("room", "ann")).present).to.equal(false);
    expect((await rc.sweepRoom("room")).leaves).to.equal(0); // not over yet
    await advanceClock(rc.redis, rc, GRACE.leaveGraceMs + 1);
    expect((await rc.sweepRoom("room")).leaves).to.equal(1);
    await eventually(() => events.length === 4);
    expect(summary(events).at(-1)).to.equal("leave:ann:explicit");
    expect((await rc.roster("room")).count).to.equal(0);
  });

  it("publishes nothing at all when a connection comes back within it: a page reload", async () => {
    const rc = new Rollcall(client(), GRACE);
    const events = await listen([rc.channel("room")]);
    await rc.heartbeat("room", "ann", "old-tab", { state: { s: 1 } });
    await rc.leave("room", "ann", "old-tab");
    await advanceClock(rc.redis, rc, 300);
    expect(await rc.heartbeat("room", "ann", "new-tab")).to.deep.include({
      joined: false,
      event: null,
    });
    await advanceClock(rc.redis, rc, 700); // past the end of the old tab's grace
    await rc.sweepRoom("room");
    await caughtUp(events);
    expect(summary(events)).to.deep.equal(["join:ann"]);
    const [ann] = (await rc.roster("room")).members;
    expect(ann).to.deep.include({ connections: 1, leavingAt: null, state: { s: 1 } });
  });

  it("holds an expired user's leave for the grace after the window, reason expired", async () => {
    const rc = new Rollcall(client(), GRACE);
    const events = await listen([rc.channel("room")]);
    await rc.heartbeat("room", "ann", "tab");
    // Once the window passed, a sweep drops the connection; the grace runs from the expiry.
    await advanceClock(rc.redis, rc, GRACE.presenceWindowMs + 1);
    expect((await rc.sweepRoom("room")).connections).to.be.greaterThan(0);
    expect((await rc.roster("room")).members[0]).to.deep.include({ connections: 0 });
    expect((await rc.sweepRoom("room")).leaves).to.equal(0); // not over yet
    await advanceClock(rc.redis, rc, GRACE.leaveGraceMs + 1);
    expect((await rc.sweepRoom("room")).leaves).to.be.greaterThan(0);
    await caughtUp(events);
    expect(summary(events)).to.deep.equal(["join:ann", "leave:ann:expired"]);
  });

  it("keeps join and leave alternating when reconnections race the grace's end under four sweepers", async () => {
    const options = { ...GRACE, leaveGraceMs: 200 };
    const writer = new Rollcall(client(), options);
    const events = await listen([writer.channel("room")]);
    const sweepers = Array.from(
      { length: 4 },
      () => new Sweeper(new Rollcall(client(), options), { intervalMs: 5 }),
    );
    sweepers.forEach((s) => s.start());
    const history = new History();
    // The clock stands still between the steps, so that each reconnection comes exactly so long
    // after its leave, however slow the machine; the sweepers race it at that instant.
    let now = await redisNow(client());
    const step = (ms: number) => stopClock(writer.redis, writer, (now += ms));
    await step(0);
    try {
      for (let trial = 0; trial < 30; trial++) {
        const user = `u${trial}`;
        await writer.heartbeat("room", user, "a");
        await writer.leave("room", user, "a");
        await step(190 + (trial % 5) * 5); // around the grace's end
        const back = await writer.heartbeat("room", user, "b");
        history.addCall({ room: "room", user, op: "heartbeat", result: back });
        await writer.leave("room", user, "b");
      }
      // Every grace ends and the sweepers announce it: nobody is left, even leaving.
      await step(options.leaveGraceMs + 1);
      const empty = async () => (await writer.roster("room")).count === 0;
      await eventually(empty, 5_000, "the last graces to end");
    } finally {
      await Promise.all(sweepers.map((s) => s.stop()));
    }
    await caughtUp(events);
    for (const event of events) history.addEvent(event, "pubsub");
    const report = history.check({ complete: ["pubsub"], quiet: true });
    expect(report.violations).to.deep.equal([]);
    // Those 190 and 195 ms after the leave beat the grace (no events); the grace ends at 200 ms,
    // and those 200 to 210 ms after came after it (a leave, then a join): 18 of the 30.
    const rejoins = events.filter((e) => e.type === "join").length - 30;
    expect(rejoins).to.equal(18);
  });
});

describe("room capacity", () => {
  afterEach(closeGateways);

  it("refuses a newcomer into a full room, writing and publishing nothing, but never a present user's tab", async () => {
    const rc = new Rollcall(client(), { ...GRACE });
    const events = await listen([rc.channel("room")]);
    for (const user of ["a", "b", "c"]) await rc.heartbeat("room", user, "tab", { capacity: 3 });
    // The joins' user changes are applied in the background: done before the count starts.
    await rc.applyUserChanges(rc.bucketOf("room"));
    await rc.redis.config("RESETSTAT");
    expect(await rc.heartbeat("room", "d", "tab", { capacity: 3 })).to.deep.equal({
      joined: false,
      full: true,
      event: null,
    });
    expect(String(await rc.redis.info("commandstats"))).to.not.match(
      /cmdstat_(hset|zadd|spublish)/,
    );
    expect(await rc.heartbeat("room", "a", "second-tab", { capacity: 3 })).to.deep.include({
      full: false,
    });
    // A member in the leave grace holds its seat.
    await rc.leave("room", "c", "tab");
    expect((await rc.heartbeat("room", "d", "tab", { capacity: 3 })).full).to.equal(true);
    await advanceClock(rc.redis, rc, GRACE.leaveGraceMs + 1); // c's grace ends
    expect((await rc.sweepRoom("room")).leaves).to.be.greaterThan(0);
    expect((await rc.heartbeat("room", "d", "tab", { capacity: 3 })).joined).to.equal(true);
    await eventually(() => events.length === 5);
    expect(events.every((e) => !("count" in e) || e.count <= 3)).to.equal(true);
  });

  it("never lets more than the capacity in when many instances race for the last seats", async () => {
    // Seats come free at once here: the leave grace is another test's matter.
    const fleet = Array.from({ length: 12 }, () => new Rollcall(client(), IMMEDIATE));
    await Promise.all(fleet.map((rc) => (rc.redis as Redis).ping()));
    const events = await listen([fleet[0]!.channel("room")]);
    for (let trial = 0; trial < 20; trial++) {
      const room = "room";
      await fleet[0]!.heartbeat(room, `first${trial}`, "c", { capacity: 5 });
      const results = await Promise.all(
        fleet.map((rc, i) => rc.heartbeat(room, `racer${trial}-${i}`, "c", { capacity: 5 })),
      );
      expect(results.filter((r) => r.joined)).to.have.length(4);
      expect(results.filter((r) => r.full)).to.have.length(8);
      expect((await fleet[0]!.roster(room)).count).to.equal(5);
      await Promise.all(
        fleet
          .map((rc, i) => rc.leave(room, `racer${trial}-${i}`, "c"))
          .concat(fleet[0]!.leave(room, `first${trial}`, "c")),
      );
    }
    await caughtUp(events);
    expect(Math.max(...events.map((e) => ("count" in e ? e.count : 0)))).to.equal(5);
  });

  it("reaches a gateway client as ROOM_FULL", async () => {
    const { url } = await startGateway(
      { capacity: (room) => (room === "small" ? 1 : undefined) },
      SHORT,
    );
    const ann = connect(url, "ann");
    await ann.join("small");
    const bob = connect(url, "bob");
    const error = await bob.join("small").catch((e: unknown) => e);
    expect(error).to.have.property("code", "ROOM_FULL");
    expect((await bob.join("big")).roster.count).to.equal(1);
  });
});
