import { expect } from "chai";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import WebSocket from "ws";
import {
  BEARER_PROTOCOL,
  SUBPROTOCOL,
  SUBPROTOCOL_V2,
  type ClientFrame,
  type ServerFrame,
} from "../../src/gateway/index.js";
import type { MeterLike } from "../../src/engine/metrics.js";
import { Replica, Rollcall, Subscriber, type PresenceEvent } from "../../src/index.js";
import { closeGateways, connect, SHORT, startGateway, token } from "../kit/gateway.js";
import { IMMEDIATE, client } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

const run = promisify(execFile);

/** A raw socket of one protocol version, and every frame it got. */
class Peer {
  readonly frames: ServerFrame[] = [];
  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer) =>
      this.frames.push(JSON.parse(data.toString()) as ServerFrame),
    );
  }

  static async open(url: string, user: string, version: 1 | 2): Promise<Peer> {
    const protocol = version === 2 ? SUBPROTOCOL_V2 : SUBPROTOCOL;
    const ws = new WebSocket(url, [protocol, BEARER_PROTOCOL + (await token(user))]);
    const peer = new Peer(ws);
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    expect(ws.protocol).to.equal(protocol);
    return peer;
  }

  send(frame: ClientFrame): void {
    this.ws.send(JSON.stringify(frame));
  }

  of<T extends ServerFrame["type"]>(type: T): Extract<ServerFrame, { type: T }>[] {
    return this.frames.filter((f): f is Extract<ServerFrame, { type: T }> => f.type === type);
  }

  /** The room's events in the order they came, after its first snapshot. */
  events(): PresenceEvent[] {
    return this.frames.flatMap((f) =>
      f.type === "event" ? [f.event] : f.type === "events" ? f.events : [],
    );
  }
}

/** Counters a test reads: name{attributes} → sum. */
function testMeter(): { meter: MeterLike; sums: Map<string, number> } {
  const sums = new Map<string, number>();
  const counter = (name: string) => ({
    add: (value: number, attributes: Record<string, unknown> = {}) => {
      const key = `${name}${JSON.stringify(attributes)}`;
      sums.set(key, (sums.get(key) ?? 0) + value);
    },
  });
  const meter: MeterLike = {
    createCounter: counter,
    createUpDownCounter: counter,
    createHistogram: () => ({ record: () => undefined }),
  };
  return { meter, sums };
}

const reads = (sums: Map<string, number>) =>
  [...sums]
    .filter(([k]) => k.startsWith("rollcall.gateway.snapshot.reads"))
    .reduce((a, [, v]) => a + v, 0);

/** Each event's prev is the one before's seq: nothing between them was missed. */
function expectChain(events: PresenceEvent[], from: number): void {
  let prev = from;
  for (const e of events.filter((e) => e.seq > from)) {
    expect(e.prev, `event ${e.seq}`).to.equal(prev);
    prev = e.seq;
  }
}

describe("large rooms on the gateway", () => {
  afterEach(closeGateways);

  it("coalesces a large room's events for v2 sockets, serves v1 ones an event frame each, both chains unbroken", async () => {
    const { url, rollcall } = await startGateway({ coalesce: { fromMembers: 3, intervalMs: 100 } });
    const v2 = await Peer.open(url, "ann", 2);
    const v1 = await Peer.open(url, "bob", 1);
    for (const peer of [v2, v1]) peer.send({ type: "join", room: "big", ref: "j" });
    await eventually(() => v2.of("snapshot").length === 1 && v1.of("snapshot").length === 1);
    const users = Array.from({ length: 12 }, (_, i) => `u${i}`);
    // Twelve joins in one call: they reach the gateway together, within one interval, however
    // slow the machine (a call each could each take longer than the interval).
    await rollcall.heartbeatMany(
      users.map((user) => ({ room: "big", user, connection: `c-${user}` })),
    );
    await rollcall.startTyping("big", "u0");
    for (const user of users.slice(0, 4)) await rollcall.leave("big", user, `c-${user}`);
    const { seq } = await rollcall.roster("big");
    await eventually(() => v2.events().at(-1)?.seq === seq && v1.events().at(-1)?.seq === seq);

    expect(v1.of("events")).to.have.length(0);
    expect(v2.of("events").some((f) => f.events.length > 1)).to.equal(true);
    expect(v2.frames.length).to.be.below(v1.frames.length);
    for (const peer of [v2, v1]) {
      const [snapshot] = peer.of("snapshot");
      expectChain(peer.events(), snapshot!.roster.seq);
      const replica = new Replica("big");
      replica.install(snapshot!.roster);
      for (const e of peer.events()) expect(replica.receive(e).resync).to.equal(false);
      expect(replica.roster.members.map((m) => m.user).sort()).to.deep.equal(
        ["ann", "bob", ...users.slice(4)].sort(),
      );
    }
  });

  it("keeps the browser client's replica whole through coalesced batches", async () => {
    const { url, rollcall } = await startGateway({ coalesce: { fromMembers: 2, intervalMs: 50 } });
    const room = await connect(url, "ann").join("big");
    for (let i = 0; i < 10; i++) await rollcall.heartbeat("big", `u${i}`, `c${i}`);
    await rollcall.leave("big", "u3", "c3");
    await eventually(async () => {
      const roster = await rollcall.roster("big");
      expect(room.roster.seq).to.equal(roster.seq);
      expect(room.roster.members.map((m) => m.user)).to.deep.equal(
        roster.members.map((m) => m.user),
      );
      return room.synced;
    });
  });

  it("lets a v2 socket watch a room's count without its events, in few frames; a v1 socket may not", async () => {
    const { url, rollcall } = await startGateway({ countIntervalMs: 200 });
    const watcher = await Peer.open(url, "ann", 2);
    watcher.send({ type: "watch", room: "counted", ref: "w" });
    await eventually(() => watcher.of("count").length === 1);
    expect(watcher.of("count")[0]).to.deep.include({ room: "counted", count: 0, ref: "w" });
    // Twenty joins in one call (however slow the machine, within one interval), told in a few
    // frames (one per 200 ms at most), and no event at all.
    await rollcall.heartbeatMany(
      Array.from({ length: 20 }, (_, i) => ({
        room: "counted",
        user: `u${i}`,
        connection: `c${i}`,
      })),
    );
    await eventually(() => watcher.of("count").at(-1)?.count === 20);
    expect(watcher.of("count").length).to.be.below(10);
    expect(watcher.events()).to.have.length(0);
    watcher.send({ type: "unwatch", room: "counted", ref: "u" });
    await eventually(() => watcher.of("ack").some((a) => a.ref === "u"));

    const old = await Peer.open(url, "bob", 1);
    old.send({ type: "watch", room: "counted", ref: "w" });
    await eventually(() => old.of("error").length === 1);
    expect(old.of("error")[0]).to.include({ code: "UNKNOWN_FRAME", ref: "w" });
  });

  it("reads a watched room's count again, not its roster, when the subscriber connection comes back; a member joining after still gets every event", async () => {
    const { meter, sums } = testMeter();
    // A window long enough that carl, who beats once, stays present throughout.
    const engine = { ...SHORT, presenceWindowMs: 60_000, keyTtlMs: 180_000, meter };
    const rollcall = new Rollcall(client(), { ...IMMEDIATE, ...engine });
    // The gateway's subscriber misses carl's join, as one whose connection dropped would.
    let missed = 0;
    const subscriber = new Subscriber(rollcall, {
      relay: (_channel, message, deliver) =>
        message.includes('"carl"') && missed === 0 ? (missed += 1) : deliver(message),
    });
    const { url } = await startGateway({ subscriber, countIntervalMs: 50 }, engine);
    const watcher = await Peer.open(url, "ann", 2);
    watcher.send({ type: "watch", room: "lobby", ref: "w" });
    // A member comes and goes: the room's feed has followed it, and is left watched only.
    const bob = await Peer.open(url, "bob", 2);
    bob.send({ type: "join", room: "lobby", ref: "j" });
    await eventually(() => watcher.of("count").at(-1)?.count === 1);
    bob.send({ type: "leave", room: "lobby", ref: "l" });
    await eventually(() => watcher.of("count").at(-1)?.count === 0);
    await rollcall.heartbeat("lobby", "carl", "c");
    await eventually(() => missed === 1);
    const before = reads(sums);

    await rollcall.redis.call("CLIENT", "KILL", "TYPE", "pubsub");
    await eventually(() => watcher.of("count").at(-1)?.count === 1, 5_000);
    expect(reads(sums)).to.equal(before);

    bob.send({ type: "join", room: "lobby", ref: "j2" });
    await eventually(() => bob.of("snapshot").length === 2);
    const snapshot = bob.of("snapshot")[1]!;
    expect(snapshot.roster.members.map((m) => m.user)).to.deep.equal(["bob", "carl"]);
    await rollcall.heartbeat("lobby", "dan", "d");
    await rollcall.leave("lobby", "carl", "c");
    await eventually(() => bob.events().at(-1)?.user === "carl");
    const after = bob.events().filter((e) => e.seq > snapshot.roster.seq);
    expect(after.map((e) => `${e.type} ${e.user}`)).to.deep.equal(["join dan", "leave carl"]);
    expectChain(after, snapshot.roster.seq);
    subscriber.close();
  });

  it("listens with an accept queue as long as the kernel allows, for a storm of reconnects", async () => {
    const { url } = await startGateway();
    const { port } = new URL(url);
    // ss shows a listening socket's accept queue, as the kernel set it, in its Send-Q column.
    const { stdout } = await run("ss", ["-Hltn", `sport = :${port}`]);
    const [, , queue] = stdout.trim().split(/\s+/);
    const somaxconn = Number((await readFile("/proc/sys/net/core/somaxconn", "utf8")).trim());
    // Node's default is 511: more than that many connections at once would have SYNs dropped.
    expect(Number(queue)).to.equal(somaxconn).and.to.be.above(511);
  });

  it("gives the browser client a watched room's count", async () => {
    const { url, rollcall } = await startGateway({ countIntervalMs: 50 });
    const counted = await connect(url, "ann").watch("lobby");
    expect(counted.count).to.equal(0);
    await rollcall.heartbeat("lobby", "bob", "c1");
    await eventually(() => counted.count === 1);
  });

  it("fails a count watch awaited when the browser client closes, and one asked for after", async () => {
    const { url } = await startGateway({ countIntervalMs: 50 });
    const client = connect(url, "ann");
    const awaited = client.watch("lobby"); // sent once the socket opens: it never does
    client.close();
    await expectClosed(awaited);
    await expectClosed(client.watch("lobby"));
  });

  it("serves sockets that join a room together from one snapshot read, each with its own join in it", async () => {
    const { meter, sums } = testMeter();
    const { url } = await startGateway({}, { ...SHORT, meter });
    const peers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => Peer.open(url, `p${i}`, 2)),
    );
    for (const peer of peers) peer.send({ type: "join", room: "crowd", ref: "j" });
    await eventually(() => peers.every((p) => p.of("snapshot").length === 1));
    expect(reads(sums)).to.be.at.most(5);
    peers.forEach((peer, i) => {
      const users = peer.of("snapshot")[0]!.roster.members.map((m) => m.user);
      expect(users).to.include(`p${i}`);
    });
  });

  it("sends a joining socket a room past rosterLimit whole, read in pages", async () => {
    const { meter, sums } = testMeter();
    const { url, rollcall } = await startGateway({}, { ...SHORT, rosterLimit: 4, meter });
    const users = Array.from({ length: 11 }, (_, i) => `m${i}`);
    await rollcall.heartbeatMany(
      users.map((user) => ({ room: "paged", user, connection: `c-${user}` })),
    );
    const room = await connect(url, "ann").join("paged");
    expect(room.roster.members.map((m) => m.user).sort()).to.deep.equal(["ann", ...users].sort());
    expect(room.roster.count).to.equal(12);
    expect(sums.get(`rollcall.gateway.snapshot.reads${JSON.stringify({ pages: 3 })}`)).to.equal(1);
  });
});

async function expectClosed(watch: Promise<unknown>): Promise<void> {
  const error = await watch.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).to.include({ code: "CLOSED" });
}
