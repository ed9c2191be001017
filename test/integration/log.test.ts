import { expect } from "chai";
import { LogConsumer, Rollcall, type PresenceEvent } from "../../src/index.js";
import { IMMEDIATE, client, listen, redisNow } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

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
    await Promise.all(consumers.map((c) => c.stop())); // their passes in flight handled, too
    expect([...seen.values()].every((names) => names.length === 1)).to.equal(true);
    expect(new Set([...seen.values()].flat()).size).to.be.greaterThan(1);
  });

  it("resumes a restarted consumer's pending events, and claims a dead one's", async () => {
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...LOGGED, buckets: 1 });
    await traffic(rc, ["a"]);
    // "crash" reads every event and dies before acknowledging any.
    let reading = 0;
    const hang = () => ((reading += 1), new Promise<void>(() => undefined));
    const crash = new LogConsumer(rc, hang, { group: "g", consumer: "crash" });
    void crash.consumeOnce();
    await eventually(() => reading === 1); // it read the events, and handles the first forever
    // Restarted under its name, it finishes them first.
    const again: number[] = [];
    const restarted = new LogConsumer(rc, (e) => void again.push(e.seq), {
      group: "g",
      consumer: "crash",
    });
    expect(await restarted.consumeOnce()).to.equal(6);
    await restarted.stop();

    await traffic(rc, ["b"]);
    const dead = new LogConsumer(rc, hang, { group: "g", consumer: "dead" });
    void dead.consumeOnce();
    await eventually(() => reading === 2);
    const heir: number[] = [];
    const other = new LogConsumer(rc, (e) => void heir.push(e.seq), {
      group: "g",
      consumer: "heir",
      claimIdleMs: 200,
    });
    expect(await other.consumeOnce()).to.equal(0); // not idle long enough yet
    let claimed = 0;
    const idleLongEnough = async () => (claimed = await other.consumeOnce()) > 0;
    await eventually(idleLongEnough, 5_000, "the dead consumer's entries to be idle 200 ms");
    expect(claimed).to.equal(6);
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
    const admin = client();
    for (let i = 0; i < 5; i++) {
      await consumer.consumeOnce();
      // The failed entry is idle past claimIdleMs once Redis's clock has moved on 2 ms.
      const passed = await redisNow(admin);
      await eventually(async () => (await redisNow(admin)) > passed + 1);
    }
    expect(calls).to.equal(3);
    expect(errors.filter((e) => e === "handler bug")).to.have.length(3);
    expect(errors.some((e) => e.includes("given up after 3 attempts"))).to.equal(true);
    await consumer.stop();
  });
});
