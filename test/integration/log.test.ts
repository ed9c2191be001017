import { expect } from "chai";
import { LogConsumer, Rollcall, type PresenceEvent } from "../../src/index.js";
import { IMMEDIATE, client, eventually, listen, sleep } from "../support/redis.js";

const LOGGED = { logLength: 1_000, presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000 };

async function traffic(rc: Rollcall, rooms: string[]): Promise<void> {
  for (const room of rooms) {
    await rc.heartbeat(room, "ann", "c", { state: { s: 1 } });
    await rc.startTyping(room, "ann");
    await rc.setState(room, "ann", { s: 2 });
    await rc.heartbeat(room, "bob", "c");
    await rc.leave(room, "ann", "c");
  }
}

describe("the event log", () => {
  it("holds exactly the events published, in order, with their log ids", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...LOGGED });
    const rooms = ["a", "b", "c"];
    const published = await listen(rooms.map((r) => rc.channel(r)));
    await traffic(rc, rooms);
    await eventually(() => published.length === rooms.length * 6);
    const logged: PresenceEvent[] = [];
    const consumer = new LogConsumer(rc, (e) => void logged.push(e), { group: "audit" });
    expect(await consumer.consumeOnce()).to.equal(published.length);
    for (const room of rooms) {
      const mine = (events: PresenceEvent[]) => events.filter((e) => e.room === room);
      expect(mine(logged).map((e) => ({ ...e, log: undefined }))).to.deep.equal(
        mine(published).map((e) => ({ ...e, log: undefined })),
      );
      expect(mine(logged).map((e) => e.seq)).to.deep.equal(mine(published).map((e) => e.seq));
    }
    expect(published.every((e) => typeof e.log === "string")).to.equal(true);
    expect(await consumer.consumeOnce()).to.equal(0); // acknowledged: never again
    await consumer.stop();
  });

  it("shares a group's events among its consumers, each event handled once", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...LOGGED, buckets: 4 });
    const seen = new Map<string, string[]>();
    const consumers = ["one", "two", "three"].map(
      (name) =>
        new LogConsumer(
          rc,
          (e) =>
            void seen.set(`${e.epoch}/${e.room}/${e.seq}`, [
              ...(seen.get(`${e.epoch}/${e.room}/${e.seq}`) ?? []),
              name,
            ]),
          {
            group: "workers",
            consumer: name,
            batch: 3,
            pollMs: 10,
          },
        ),
    );
    consumers.forEach((c) => c.start());
    const rooms = Array.from({ length: 20 }, (_, i) => `room${i}`);
    await traffic(rc, rooms);
    await eventually(() => seen.size === rooms.length * 6);
    await sleep(100);
    await Promise.all(consumers.map((c) => c.stop()));
    expect([...seen.values()].every((names) => names.length === 1)).to.equal(true);
    expect(new Set([...seen.values()].flat()).size).to.be.greaterThan(1);
  });

  it("resumes a restarted consumer's pending events, and claims a dead one's", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...LOGGED, buckets: 1 });
    await traffic(rc, ["a"]);
    // "crash" reads every event and dies before acknowledging any.
    const crash = new LogConsumer(rc, () => new Promise<void>(() => undefined), {
      group: "g",
      consumer: "crash",
    });
    void crash.consumeOnce();
    await sleep(100);
    // Restarted under its name, it finishes them first.
    const again: number[] = [];
    const restarted = new LogConsumer(rc, (e) => void again.push(e.seq), {
      group: "g",
      consumer: "crash",
    });
    expect(await restarted.consumeOnce()).to.equal(6);
    await restarted.stop();

    await traffic(rc, ["b"]);
    const dead = new LogConsumer(rc, () => new Promise<void>(() => undefined), {
      group: "g",
      consumer: "dead",
    });
    void dead.consumeOnce();
    await sleep(100);
    const heir: number[] = [];
    const other = new LogConsumer(rc, (e) => void heir.push(e.seq), {
      group: "g",
      consumer: "heir",
      claimIdleMs: 200,
    });
    expect(await other.consumeOnce()).to.equal(0); // not idle long enough yet
    await sleep(250);
    expect(await other.consumeOnce()).to.equal(6);
    expect(heir).to.have.length(6);
    await other.stop();
    await Promise.all([crash.stop(), dead.stop()]);
  });

  it("retries a failing handler and gives an event up after maxAttempts, saying so", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...LOGGED, buckets: 1 });
    await rc.heartbeat("a", "ann", "c");
    let calls = 0;
    const errors: string[] = [];
    const consumer = new LogConsumer(
      rc,
      () => {
        calls += 1;
        throw new Error("handler bug");
      },
      { group: "g", claimIdleMs: 1, maxAttempts: 3 },
    );
    consumer.on("error", (e) => errors.push(e.message));
    for (let i = 0; i < 5; i++) {
      await consumer.consumeOnce();
      await sleep(5);
    }
    expect(calls).to.equal(3);
    expect(errors.filter((e) => e === "handler bug")).to.have.length(3);
    expect(errors.some((e) => e.includes("given up after 3 attempts"))).to.equal(true);
    await consumer.stop();
  });

  it("refuses to start without a log, and bad options, with typed errors", () => {
    expect(
      () => new LogConsumer(new Rollcall(client(), IMMEDIATE), () => undefined, { group: "g" }),
    )
      .to.throw()
      .with.property("code", "INVALID_OPTION");
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...LOGGED });
    for (const options of [
      { group: "a b" },
      { group: "g", from: "middle" },
      { group: "g", batch: 0 },
    ]) {
      expect(() => new LogConsumer(rc, () => undefined, options as never))
        .to.throw()
        .with.property("code", "INVALID_OPTION");
    }
  });
});
