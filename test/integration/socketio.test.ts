import { expect } from "chai";
import { SocketPresence } from "../../src/client/socketio.js";
import { InvalidInputError, type MemberState } from "../../src/index.js";
import { io as ioClient } from "socket.io-client";
import { SocketIoPresence, type SocketIoPresenceOptions } from "../../src/socketio/index.js";
import { advanceClock, stopClock } from "../kit/clock.js";
import { useCluster } from "../kit/cluster.js";
import { asReplica } from "../kit/rosters.js";
import { caughtUp, client, listen, ownRedis, redisNow, redisUrl } from "../kit/redis.js";
import {
  RECOMMENDED,
  connectIo,
  heard,
  spawnIo,
  startIo,
  type IoClient,
  type IoInstance,
  type IoProcess,
} from "../kit/socketio.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

const summary = (events: { type: string; user: string }[]) =>
  events.map((e) => `${e.type}:${e.user}`);

describe("rollcall/socket.io", () => {
  const instances: IoInstance[] = [];
  const clients: IoClient[] = [];
  const processes: IoProcess[] = [];

  async function instance(config: Parameters<typeof startIo>[0] = {}): Promise<IoInstance> {
    const started = await startIo({ redisUrl: redisUrl(), adapter: true, ...config });
    instances.push(started);
    return started;
  }

  function user(at: { url: string }, name: string | null): IoClient {
    const c = connectIo(at.url, name);
    clients.push(c);
    return c;
  }

  afterEach(async () => {
    for (const c of clients.splice(0)) c.socket.disconnect();
    await Promise.all(instances.splice(0).map((i) => i.close()));
    await Promise.all(processes.splice(0).map((p) => p.kill()));
  });

  it("shows a client on A the joins, typing, state and leaves of a user on B, each once", async () => {
    const [a, b] = [await instance(), await instance()];
    const ann = user(a, "ann");
    const replicas = new SocketPresence(ann.socket);
    await ann.join("doc");
    await eventually(() => ann.snapshots.length === 1);
    const bob = user(b, "bob");
    await bob.join("doc");
    await eventually(() => heard(ann, "doc").includes("join:bob"));
    expect(await bob.call("rollcall:typing", "doc")).to.deep.equal({ ok: true });
    expect(await bob.call("rollcall:state", "doc", { status: "away" })).to.deep.equal({ ok: true });
    await eventually(() => heard(ann, "doc").includes("update:bob"));
    expect(replicas.roster("doc")?.members.find((m) => m.user === "bob")?.state).to.deep.equal({
      status: "away",
    });
    expect(replicas.roster("doc")?.typing).to.deep.equal(["bob"]);
    await bob.leave("doc");
    await eventually(() => heard(ann, "doc").includes("leave:bob"));
    // ann's own join is in her snapshot, or an event after it, as the race went.
    expect(heard(ann, "doc").filter((line) => line !== "join:ann")).to.deep.equal([
      "join:bob",
      "typing-start:bob",
      "update:bob",
      "typing-stop:bob",
      "leave:bob",
    ]);
    // The chain is unbroken: each event follows the last, in the snapshot's epoch.
    const [snapshot] = ann.snapshots;
    let prev = snapshot!.seq;
    for (const event of ann.events.filter((e) => e.seq > snapshot!.seq)) {
      expect(event.epoch).to.equal(snapshot!.epoch);
      expect(event.prev).to.equal(prev);
      prev = event.seq;
    }
    expect(replicas.roster("doc")).to.deep.equal(asReplica(await a.rollcall.roster("doc")));
    expect(a.errors.concat(b.errors)).to.deep.equal([]);
  });

  it("announces a SIGKILLed instance's users gone once, from the other, a window and a grace after their last heartbeat", async function () {
    this.timeout(60_000);
    const admin = client();
    const b = await instance({ presence: { sweeper: { intervalMs: 100 } } });
    const a = await spawnIo({
      redisUrl: redisUrl(),
      adapter: true,
      presence: { sweeper: false, heartbeatMs: 200 },
    });
    processes.push(a);
    // On B, a socket with no user: it hears the room, and is no member whose heartbeats matter.
    const observer = user(b, null);
    await observer.join("crash");
    await eventually(() => observer.snapshots.length === 1);
    for (const name of ["ann", "bob"]) await user(a, name).join("crash");
    await eventually(() => heard(observer, "crash").length === 2, 10_000, "two joins");
    // Time stands still from here: it moves only when the test says.
    const last = await redisNow(admin);
    await stopClock(admin, b.rollcall, last);
    // Their last heartbeats: A's next round, at the stopped time.
    await eventually(async () => {
      const { members } = await b.rollcall.roster("crash");
      return members.every((m) => m.lastSeen === last);
    });
    await a.kill();
    const { presenceWindowMs: window, leaveGraceMs: grace } = RECOMMENDED;

    await stopClock(admin, b.rollcall, last + window - 1);
    expect((await b.rollcall.sweepRoom("crash")).connections, "not yet expired").to.equal(0);
    await stopClock(admin, b.rollcall, last + window);
    // B's sweeper takes the dead connections; their users are in the grace, not gone yet.
    await eventually(
      async () => {
        const roster = await b.rollcall.roster("crash");
        return roster.members.every(
          (m) => m.connections === 0 && m.leavingAt === last + window + grace,
        );
      },
      10_000,
      "the connections expired",
    );
    expect(heard(observer, "crash")).to.deep.equal(["join:ann", "join:bob"]);

    await stopClock(admin, b.rollcall, last + window + grace);
    await eventually(() => heard(observer, "crash").length === 4, 10_000, "two leaves");
    const leaves = observer.events.filter((e) => e.type === "leave");
    expect(leaves.map((e) => [e.user, e.type === "leave" && e.reason])).to.have.deep.members([
      ["ann", "expired"],
      ["bob", "expired"],
    ]);
    for (const leave of leaves) expect(leave.at - last).to.equal(window + grace);
    // Once: another sweep finds nothing, and a later event on B comes after no second leave.
    expect((await b.rollcall.sweepRoom("crash")).leaves).to.equal(0);
    await user(b, "carol").join("crash");
    await eventually(() => heard(observer, "crash").includes("join:carol"));
    expect(heard(observer, "crash")).to.have.length(5);
    expect(b.errors).to.deep.equal([]);
  });

  it("publishes nothing when a user reconnects within the leave grace, to either instance", async () => {
    const [a, b] = [await instance(), await instance()];
    const events = await listen([a.rollcall.channel("room")]);
    const leaving = () => a.rollcall.roster("room").then((r) => r.members[0]?.leavingAt);
    const first = user(a, "ann");
    await first.join("room");
    await eventually(async () => (await a.rollcall.count("room")).users === 1);
    // A clean disconnect: the leave waits for the grace, and a new socket of ann comes.
    const reconnect = async (from: IoClient, to: IoInstance) => {
      from.socket.disconnect();
      await eventually(async () => (await leaving()) != null);
      const again = user(to, "ann");
      await again.join("room");
      await eventually(async () => (await leaving()) === null);
      return again;
    };
    const reloaded = await reconnect(first, a); // a page reload
    await reconnect(reloaded, b); // through the load balancer, to the other instance
    await advanceClock(a.rollcall.redis, a.rollcall, RECOMMENDED.leaveGraceMs + 1);
    expect((await a.rollcall.sweepRoom("room")).leaves).to.equal(0);
    await caughtUp(events);
    expect(summary(events)).to.deep.equal(["join:ann"]);
  });

  it("keeps a socket recovered by connection state recovery present: no leave, no join", async () => {
    // No leave grace: only the recovery's hold keeps a leave and a join from being published.
    const a = await instance({
      adapter: false,
      recovery: true,
      engine: { ...RECOMMENDED, leaveGraceMs: 0 },
    });
    expect(a.presence.recoveryMs).to.equal(5_000);
    const events = await listen([a.rollcall.channel("room")]);
    const ann = user(a, "ann");
    const replicas = new SocketPresence(ann.socket);
    await ann.join("room");
    // Recovery restores what came after the last packet the client got: it needs one.
    const inRoster = () => ann.snapshots.some((r) => r.members.some((m) => m.user === "ann"));
    await eventually(() => inRoster() || heard(ann, "room").includes("join:ann"));
    const id = ann.socket.id;
    const before = (await a.rollcall.roster("room")).members[0]!;
    // Its transport drops (a network blip); the client reconnects and Socket.IO recovers it.
    ann.socket.io.engine.close();
    await eventually(() => ann.socket.connected && ann.socket.recovered, 10_000, "recovered");
    expect(ann.socket.id).to.equal(id);
    const after = (await a.rollcall.roster("room")).members[0]!;
    expect(after).to.deep.include({
      user: "ann",
      connections: 1,
      joinedAt: before.joinedAt,
      leavingAt: null,
    });
    // The window passes: the recovered socket's heartbeats kept its connection.
    await eventually(
      async () => (await a.rollcall.roster("room")).members[0]!.lastSeen > before.lastSeen,
    );
    expect(a.presence.roomsOf(a.io.of("/").sockets.get(id!)!)).to.deep.equal(["room"]);
    await caughtUp(events);
    expect(summary(events)).to.deep.equal(["join:ann"]);
    await eventually(() => replicas.roster("room")?.count === 1);
  });

  it("leaves a recoverable socket's rooms once recoveryMs passed without its recovery", async () => {
    const a = await instance({
      adapter: false,
      recovery: true,
      engine: { ...RECOMMENDED, leaveGraceMs: 0 },
      presence: { recoveryMs: 2_000 },
    });
    const events = await listen([a.rollcall.channel("room")]);
    const ann = user(a, "ann");
    await ann.join("room");
    await eventually(async () => (await a.rollcall.count("room")).connections === 1);
    ann.socket.io.reconnection(false); // it never comes back
    ann.socket.io.engine.close();
    await eventually(() => a.io.of("/").sockets.size === 0); // the server saw it go
    // Held: the connection stays (heartbeated) for its recovery.
    expect((await a.rollcall.count("room")).connections).to.equal(1);
    await eventually(() => summary(events).includes("leave:ann"), 10_000, "the held leave");
    expect(summary(events)).to.deep.equal(["join:ann", "leave:ann"]);
    expect(a.errors).to.deep.equal([]);
  });

  it("takes in sockets connected before it, with the state hook's state, per namespace", async () => {
    const a = await instance({ adapter: false });
    const nsp = a.io.of("/late");
    nsp.on("connection", (socket) => void socket.join("room"));
    const connect = (auth: object) =>
      ioClient(`${a.url}/late`, { auth, transports: ["websocket"] });
    const sockets = [connect({ user: "ann" }), connect({ user: "bob", big: true })];
    try {
      await eventually(
        () => [...nsp.sockets.values()].filter((s) => s.rooms.has("room")).length === 2,
      );
      const errors: Error[] = [];
      const late = new SocketIoPresence(nsp, a.rollcall, {
        user: (s) => (s.handshake.auth as { user: string }).user,
        // A state too big is reported, and the member joins without one.
        state: (socket, room): MemberState =>
          socket.handshake.auth.big ? { big: "x".repeat(2_000) } : { room },
        sweeper: false,
      });
      late.on("error", (error) => errors.push(error));
      try {
        await eventually(async () => (await a.rollcall.count("room")).users === 2);
        const { members } = await a.rollcall.roster("room");
        expect(members.map((m) => [m.user, m.state])).to.deep.equal([
          ["ann", { room: "room" }],
          ["bob", null],
        ]);
        expect(errors.map((e) => (e as InvalidInputError).code)).to.deep.equal(["INVALID_STATE"]);
      } finally {
        await late.close();
      }
      expect((await a.rollcall.count("room")).connections, "left at close").to.equal(0);
    } finally {
      for (const socket of sockets) socket.disconnect();
    }
  });

  it("spends one event budget over all the sockets of a user, and caps their sockets", async () => {
    const a = await instance({ presence: { rateBurst: 20, ratePerSecond: 1 } });
    const tabs = Array.from({ length: 10 }, () => user(a, "ann"));
    await Promise.all(tabs.map((t) => t.join("doc")));
    await eventually(async () => (await a.rollcall.count("doc")).connections === 10);
    const start = performance.now();
    const replies = await Promise.all(
      tabs.flatMap((t) => Array.from({ length: 20 }, () => t.call("rollcall:typing", "doc"))),
    );
    const seconds = (performance.now() - start) / 1000;
    const ok = replies.filter((r) => r.ok).length;
    // The burst, and what refilled (1 a second) while the 200 events came, however slowly.
    expect(ok)
      .to.be.at.least(20)
      .and.at.most(20 + Math.ceil(seconds));
    expect(replies.filter((r) => !r.ok).every((r) => r.code === "RATE_LIMITED")).to.equal(true);
  });

  it("disconnects a user's socket past maxSocketsPerUser (64 by default) with TOO_MANY_SOCKETS", async () => {
    const a = await instance();
    const tabs = Array.from({ length: 64 }, () => user(a, "ann"));
    await eventually(() => tabs.every((t) => t.socket.connected));
    const extra = user(a, "ann");
    await eventually(() => extra.errors.length > 0);
    expect(extra.errors[0]).to.include({ code: "TOO_MANY_SOCKETS" });
    await eventually(() => !extra.socket.connected);
    // Another user is not counted against ann, and a tab closed makes room.
    const bob = user(a, "bob");
    await bob.join("doc");
    await eventually(async () => (await a.rollcall.count("doc")).users === 1);
    tabs[0]!.socket.disconnect();
    const again = user(a, "ann");
    await again.join("doc");
    await eventually(async () => (await a.rollcall.count("doc")).users === 2);
    expect(again.errors).to.deep.equal([]);
  });

  it("reports hooks that throw, return promises or junk, and goes on without them", async () => {
    const unhandled = watchUnhandled();
    const a = await instance({ adapter: false });
    const nsp = a.io.of("/hooks");
    nsp.on("connection", (socket) => void socket.join(String(socket.handshake.auth.room)));
    const errors: Error[] = [];
    const presence = new SocketIoPresence(nsp, a.rollcall, {
      // A user id by promise (a rejected one for bob): no user, reported, never unhandled.
      user: ((s) => {
        const name = (s.handshake.auth as { user: string }).user;
        if (name === "bob") return Promise.reject(new Error("no such session"));
        if (name === "cat") return Promise.resolve("cat");
        if (name === "dan") throw new Error("the user hook threw");
        return name;
      }) as SocketIoPresenceOptions["user"],
      rooms: ((room: string) => (room === "odd" ? "yes" : room !== "skip")) as never,
      state: ((_s: unknown, room: string) =>
        room === "async" ? Promise.resolve({ a: 1 }) : undefined) as never,
      sweeper: false,
    });
    presence.on("error", (error) => errors.push(error));
    const connect = (auth: object) =>
      ioClient(`${a.url}/hooks`, { auth, transports: ["websocket"] });
    const sockets = [
      connect({ user: "ann", room: "doc" }),
      connect({ user: "bob", room: "doc" }),
      connect({ user: "cat", room: "doc" }),
      connect({ user: "dan", room: "doc" }),
      connect({ user: "eve", room: "odd" }),
      connect({ user: "fay", room: "async" }),
    ];
    try {
      await eventually(async () => (await a.rollcall.count("async")).users === 1);
      await eventually(() => errors.length >= 5);
      const { members } = await a.rollcall.roster("doc");
      expect(members.map((m) => m.user)).to.deep.equal(["ann"]);
      expect(
        (await a.rollcall.roster("async")).members.map((m) => [m.user, m.state]),
      ).to.deep.equal([["fay", null]]);
      expect((await a.rollcall.count("odd")).users).to.equal(0);
      expect(errors.map((e) => e.message).sort()).to.deep.equal([
        'the rooms hook returned "yes", not a boolean',
        "the state hook returned a promise, not a state (it must not be async)",
        "the user hook returned a promise, not a user id (it must not be async)",
        "the user hook returned a promise, not a user id (it must not be async)",
        "the user hook threw",
      ]);
      // The rejected promise was swallowed: nothing unhandled.
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled.count()).to.equal(0);
    } finally {
      for (const socket of sockets) socket.disconnect();
      await presence.close();
      unhandled.stop();
    }
  });

  it("refuses bad input with typed errors, changing nothing", async () => {
    const a = await instance({ presence: { rateBurst: 8, ratePerSecond: 1 } });
    const nsp = a.io.of("/bad");
    const options = (extra: object) => ({ user: () => "x", sweeper: false as const, ...extra });
    expect(() => new SocketIoPresence(nsp, a.rollcall, {} as never)).to.throw(InvalidInputError);
    expect(() => new SocketIoPresence(nsp, a.rollcall, options({ color: 1 }))).to.throw(
      /unknown option color/,
    );
    expect(() => new SocketIoPresence(nsp, a.rollcall, options({ heartbeatMs: 50 }))).to.throw(
      InvalidInputError,
    );
    const ann = user(a, "ann");
    const watcher = user(a, null);
    await ann.join("room");
    await watcher.join("room");
    await eventually(() => watcher.snapshots.length === 1);
    expect(await ann.call("rollcall:typing", "elsewhere")).to.deep.include({
      ok: false,
      code: "NOT_JOINED",
    });
    expect(await ann.call("rollcall:typing", 42)).to.deep.include({
      ok: false,
      code: "NOT_JOINED",
    });
    expect(await ann.call("rollcall:state", "room", ["not", "an object"])).to.deep.include({
      ok: false,
      code: "INVALID_STATE",
    });
    expect(await ann.call("rollcall:state", "room", { big: "x".repeat(5_000) })).to.deep.include({
      ok: false,
      code: "INVALID_STATE",
    });
    expect(await watcher.call("rollcall:typing", "room"), "an observer").to.deep.include({
      ok: false,
      code: "NOT_JOINED",
    });
    // Without an ack, the refusal comes as rollcall:error.
    ann.socket.emit("rollcall:typing", "elsewhere");
    await eventually(() => ann.errors.length === 1);
    expect(ann.errors[0]).to.deep.include({ code: "NOT_JOINED", room: "elsewhere" });
    // A room the filter takes but rollcall cannot name.
    await ann.join("bad\u0001room");
    await eventually(() => ann.errors.length === 2);
    expect(ann.errors[1]).to.deep.include({ code: "INVALID_ID" });
    // Floods, sent at once, of twice the burst (8): past it, a refusal, unless handling them took
    // the 8 s the bucket needs to refill (1 a second), whatever the machine's speed. Acked, every
    // call is answered.
    const dan = user(a, "dan");
    await dan.join("room");
    const replies = await Promise.all(
      Array.from({ length: 16 }, () => dan.call("rollcall:typing", "room")),
    );
    expect(replies.filter((r) => r.ok).length).to.be.at.least(8);
    expect(replies.filter((r) => r.code === "RATE_LIMITED").length).to.be.greaterThan(0);
    // Unacked, one error, then silence; an acked call among them still gets its answer.
    const cat = user(a, "cat");
    await cat.join("room");
    for (let i = 0; i < 16; i++) cat.socket.emit("rollcall:typing", "room");
    const answered = cat.call("rollcall:typing", "room");
    expect(await answered).to.deep.include({ code: "RATE_LIMITED" });
    await eventually(() => cat.errors.length > 0);
    expect(
      cat.errors.map((e) => e.code),
      "one error, then silence",
    ).to.deep.equal(["RATE_LIMITED"]);
    // Server calls throw typed errors.
    const socket = a.io.of("/").sockets.get(ann.socket.id!)!;
    const observer = a.io.of("/").sockets.get(watcher.socket.id!)!;
    await expectRejection(a.presence.startTyping(socket, "elsewhere"), "INVALID_OPTION");
    await expectRejection(a.presence.join(socket, "bad\u0000"), "INVALID_ID");
    await expectRejection(a.presence.setState(socket, "room", "nope" as never), "INVALID_STATE");
    await expectRejection(a.presence.join(observer, "room"), "INVALID_OPTION");
    const roster = await a.rollcall.roster("room");
    expect(roster.members.map((m) => [m.user, m.state])).to.deep.equal([
      ["ann", null],
      ["cat", null],
      ["dan", null],
    ]);
  });

  it("follows explicit calls only with rooms: false", async () => {
    const a = await instance({
      adapter: false,
      engine: { ...RECOMMENDED, leaveGraceMs: 0 },
      presence: { rooms: false },
    });
    const events = await listen([a.rollcall.channel("doc")]);
    const ann = user(a, "ann");
    await ann.join("lobby"); // a Socket.IO room: no presence
    await eventually(() => a.io.of("/").sockets.size === 1);
    const socket = [...a.io.of("/").sockets.values()][0]!;
    expect(a.presence.roomsOf(socket)).to.deep.equal([]);
    expect((await a.presence.join(socket, "doc", { state: { s: 1 } })).joined).to.equal(true);
    expect(socket.rooms.has("doc")).to.equal(true);
    await eventually(() => ann.snapshots.length === 1); // what follows comes as events
    await a.presence.startTyping(socket, "doc");
    await a.presence.setState(socket, "doc", { s: 2 });
    await eventually(() => heard(ann, "doc").includes("update:ann"));
    await a.presence.leave(socket, "doc");
    expect(heard(ann, "doc").filter((l) => l !== "join:ann")).to.deep.equal([
      "typing-start:ann",
      "update:ann",
    ]);
    await caughtUp(events);
    expect(summary(events)).to.deep.equal([
      "join:ann",
      "typing-start:ann",
      "update:ann",
      "typing-stop:ann",
      "leave:ann",
    ]);
    expect(socket.rooms.has("doc"), "still in the Socket.IO room").to.equal(true);
    expect((await a.rollcall.count("lobby")).users).to.equal(0);
  });

  it("sends a leave after the join it follows, when both come in one turn", async () => {
    const a = await instance({
      adapter: false,
      engine: { ...RECOMMENDED, leaveGraceMs: 0 },
      presence: { rooms: false },
    });
    const events = await listen([a.rollcall.channel("doc")]);
    await user(a, "ann").join("lobby");
    await eventually(() => a.io.of("/").sockets.size === 1);
    const socket = [...a.io.of("/").sockets.values()][0]!;
    // The join waits in the turn's batch; the leave must not overtake it into Redis.
    const joined = a.presence.join(socket, "doc");
    await Promise.all([joined, a.presence.leave(socket, "doc")]);
    expect((await a.rollcall.count("doc")).users).to.equal(0);
    await caughtUp(events);
    expect(summary(events)).to.deep.equal(["join:ann", "leave:ann"]);
  });

  it("survives a Redis outage: calls are refused, nothing crashes, presence resumes", async function () {
    this.timeout(30_000);
    const own = await ownRedis();
    const unhandled = watchUnhandled();
    try {
      const a = await instance({
        redisUrl: own.url,
        adapter: false,
        redisOptions: { maxRetriesPerRequest: 1, retryStrategy: () => 50 },
        engine: { ...RECOMMENDED, leaveGraceMs: 0 },
        presence: { heartbeatMs: 200, sweeper: { intervalMs: 100 } },
      });
      const ann = user(a, "ann");
      await ann.join("room");
      await eventually(() => ann.snapshots.length === 1);
      await own.server.stop();
      expect(await ann.call("rollcall:typing", "room")).to.deep.include({
        ok: false,
        code: "UNAVAILABLE",
      });
      const bob = user(a, "bob");
      await bob.join("room"); // its join fails, and the heartbeat rounds keep trying
      await eventually(() => bob.errors.some((e) => e.code === "UNAVAILABLE"));
      await own.server.start();
      await eventually(
        async () => {
          const roster = await a.rollcall.roster("room");
          return roster.count === 2;
        },
        15_000,
        "both present again",
      );
      expect(await ann.call("rollcall:typing", "room")).to.deep.equal({ ok: true });
      expect(a.errors.length).to.be.greaterThan(0);
      expect(unhandled.count()).to.equal(0);
    } finally {
      unhandled.stop();
    }
  });

  it("delivers to local sockets only, also without the Redis adapter", async () => {
    const [a, b] = [await instance({ adapter: false }), await instance({ adapter: false })];
    const ann = user(a, "ann");
    const bob = user(b, "bob");
    await ann.join("room");
    await bob.join("room");
    await eventually(
      () => heard(ann, "room").includes("join:bob") || ann.snapshots.some((s) => s.count === 2),
    );
    await eventually(
      () => heard(bob, "room").includes("join:ann") || bob.snapshots.at(-1)?.count === 2,
    );
    await bob.call("rollcall:typing", "room");
    await eventually(() => heard(ann, "room").includes("typing-start:bob"));
    await eventually(() => heard(bob, "room").includes("typing-start:bob"));
    expect(heard(ann, "room").filter((l) => l === "typing-start:bob")).to.have.length(1);
    expect(heard(bob, "room").filter((l) => l === "typing-start:bob")).to.have.length(1);
  });

  it("sends a room's local sockets a new snapshot when its subscriber connection came back", async () => {
    const [a, b] = [await instance(), await instance()];
    const ann = user(a, "ann");
    const cat = user(a, "cat");
    const replicas = new SocketPresence(cat.socket);
    for (const c of [ann, cat]) await c.join("room");
    await eventually(() => replicas.roster("room")?.count === 2);
    const before = [ann.snapshots.length, cat.snapshots.length];
    await client().call("CLIENT", "KILL", "TYPE", "pubsub"); // every subscriber connection drops
    const bob = user(b, "bob");
    await bob.join("room"); // while A may not hear it
    await eventually(() => ann.snapshots.length > before[0]! && cat.snapshots.length > before[1]!);
    await eventually(async () => {
      expect(replicas.roster("room")).to.deep.equal(asReplica(await a.rollcall.roster("room")));
      return true;
    });
    expect(replicas.roster("room")?.members.map((m) => m.user)).to.deep.equal([
      "ann",
      "bob",
      "cat",
    ]);
  });

  describe("on a Redis Cluster of 3 masters and 3 replicas", () => {
    const { cluster } = useCluster(3, { replicas: 1 });

    it("shows a client on A the joins, typing, state and leaves of a user on B", async () => {
      const nodes = cluster().nodes;
      const [a, b] = [
        await instance({ cluster: nodes, adapter: true }),
        await instance({ cluster: nodes, adapter: true }),
      ];
      const rooms = ["alpha", "beta", "gamma", "delta"];
      const ann = user(a, "ann");
      const bob = user(b, "bob");
      for (const room of rooms) await ann.join(room);
      await eventually(() => ann.snapshots.length === rooms.length, 10_000);
      for (const room of rooms) {
        await bob.join(room);
        expect(await bob.call("rollcall:typing", room)).to.deep.equal({ ok: true });
        expect(await bob.call("rollcall:state", room, { n: 1 })).to.deep.equal({ ok: true });
        await bob.leave(room);
      }
      const expected = [
        "join:bob",
        "typing-start:bob",
        "update:bob",
        "typing-stop:bob",
        "leave:bob",
      ];
      for (const room of rooms) {
        await eventually(
          () => heard(ann, room).includes("leave:bob"),
          10_000,
          `bob leaving ${room}`,
        );
        expect(heard(ann, room).filter((l) => l !== "join:ann")).to.deep.equal(expected);
      }
      const slots = rooms.map((r) => a.rollcall.bucketOf(r));
      expect(new Set(slots).size, "rooms in several buckets").to.be.greaterThan(1);
      expect(a.errors.concat(b.errors)).to.deep.equal([]);
    });
  });
});

async function expectRejection(promise: Promise<unknown>, code: string): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).to.be.instanceOf(InvalidInputError).with.property("code", code);
}
