// The connection host under every integration, on its own: each connection's calls in order
// (a leave never reaches Redis before its join, a join after the close joins nothing), the
// local fan-out to followers, and what a failure is called on the wire.
import { expect } from "chai";
import { Rollcall, type PresenceEvent } from "../../src/index.js";
import { FrameError } from "../../src/protocol/frames.js";
import type { Snapshot } from "../../src/protocol/replica.js";
import { Host } from "../../src/runtime/host.js";
import { HookError } from "../../src/runtime/hooks.js";
import { client, IMMEDIATE } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

interface Follower {
  readonly events: PresenceEvent[];
  readonly snapshots: { snapshot: Snapshot; ref: string | undefined }[];
}

const follower = (): Follower => ({ events: [], snapshots: [] });

describe("the connection host", () => {
  const hosts: Host<Follower>[] = [];
  const errors: unknown[] = [];

  function start(): { host: Host<Follower>; rollcall: Rollcall } {
    const rollcall = new Rollcall(client(), { ...IMMEDIATE, leaveGraceMs: 0 });
    const host = new Host<Follower>(
      rollcall,
      {
        events: (to, batch) => to.events.push(...batch.events),
        snapshot: (to, snapshot, ref) => to.snapshots.push({ snapshot, ref }),
      },
      (error) => errors.push(error),
      { sweeper: false },
    );
    hosts.push(host);
    return { host, rollcall };
  }

  afterEach(async () => {
    await Promise.all(hosts.splice(0).map((h) => h.close()));
    errors.length = 0;
  });

  it("carries out a connection's calls in order: the leave after the join it follows", async () => {
    const { host, rollcall } = start();
    const ann = follower();
    const connection = host.connect("ann", ann);
    // Asked for in one turn: the join's heartbeat waits for the turn's batch, the leave for it.
    const joined = connection.join("doc", { ref: "j" });
    const typed = connection.startTyping("doc");
    const left = connection.leave("doc");
    expect((await joined).joined).to.equal(true);
    expect((await typed).started).to.equal(true);
    expect(await left).to.deep.include({ removed: true, left: true });
    expect((await rollcall.count("doc")).connections).to.equal(0);
    expect(ann.snapshots.map((s) => [s.ref, s.snapshot.count])).to.deep.equal([["j", 1]]);
    // Typing in a room it is not in is refused at its turn, as the wire says it.
    const refused = await connection.startTyping("doc").catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(FrameError).with.property("code", "NOT_JOINED");
  });

  it("joins nothing for a join that waited past the close", async () => {
    const { host, rollcall } = start();
    const connection = host.connect("bob");
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // A join that waits for something first (Hocuspocus waits for its document to be followed).
    const late = connection.inTurn(async (turn) => {
      await gate;
      return turn.join("doc", { retry: true });
    });
    const closed = connection.close();
    open();
    expect(await late).to.deep.equal({ joined: false, full: false, event: null });
    await closed;
    expect(connection.rooms()).to.deep.equal([]);
    expect((await rollcall.count("doc")).connections).to.equal(0);
    expect(host.wheel.size).to.equal(0);
  });

  it("sends a room's events to its followers in chain order, and a snapshot to each that joins", async () => {
    const { host } = start();
    const [ann, bob] = [follower(), follower()];
    const a = host.connect("ann", ann);
    await a.join("doc");
    const b = host.connect("bob", bob);
    await b.join("doc", { state: { status: "here" } });
    await b.setState("doc", { status: "away" });
    await b.close();
    await eventually(() => ann.events.some((e) => e.type === "leave"));
    // Her own join is in her snapshot: the feed passes on only what follows it, one chain.
    expect(ann.events.map((e) => `${e.type}:${e.user}`)).to.deep.equal([
      "join:bob",
      "update:bob",
      "leave:bob",
    ]);
    let prev = ann.snapshots[0]!.snapshot.seq;
    for (const event of ann.events) {
      expect(event.prev).to.equal(prev);
      prev = event.seq;
    }
    expect(bob.snapshots).to.have.length(1);
    expect(bob.snapshots[0]!.snapshot.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
  });

  it("names failures for the wire, reporting the server's own", () => {
    const { host } = start();
    expect(host.refusal(new FrameError("ROOM_FULL", "full"))).to.deep.equal({
      code: "ROOM_FULL",
      message: "full",
    });
    expect(host.refusal(new HookError("authorize", "timeout", "took too long"))).to.deep.include({
      code: "UNAVAILABLE",
    });
    expect(host.refusal(new TypeError("a bug"))).to.deep.include({ code: "INTERNAL" });
    expect(errors).to.have.length(2);
  });
});
