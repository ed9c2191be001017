// rollcall/fastify against Fastify's real server and the browser client (over `ws`): two
// instances on one Redis, a SIGKILLed one's users left once, bad input, a Redis outage.
import { expect } from "chai";
import Fastify from "fastify";
import websocket from "@fastify/websocket";
import WebSocket from "ws";
import { fastifyPresence, websocketOptions } from "../../src/fastify/index.js";
import { Rollcall, type PresenceEvent } from "../../src/index.js";
import { BEARER_PROTOCOL, SUBPROTOCOL_V2 } from "../../src/protocol/frames.js";
import { stopClock } from "../kit/clock.js";
import { startFastify, spawnFastify, type FastifyConfig } from "../kit/fastify.js";
import type { FastifyInstanceUnderTest } from "../kit/fastify.js";
import type { ServerProcess } from "../kit/serverProcess.js";
import { closeGateways, connect } from "../kit/gateway.js";
import { client, ownRedis, redisNow, redisUrl } from "../kit/redis.js";
import { eventually, watchUnhandled } from "../kit/wait.js";

/** The windows the docs recommend for the integrations. */
const ENGINE = { presenceWindowMs: 10_000, leaveGraceMs: 2_000, typingWindowMs: 5_000 };

describe("rollcall/fastify", function () {
  this.timeout(30_000);
  const instances: FastifyInstanceUnderTest[] = [];
  const processes: ServerProcess[] = [];

  async function instance(config: Partial<FastifyConfig> = {}) {
    const started = await startFastify({ redisUrl: redisUrl(), engine: ENGINE, ...config });
    instances.push(started);
    return started;
  }

  /** The browser client of a user, with the session token the test app reads. */
  const user = (at: { url: string }, name: string) =>
    connect(at.url, name, { token: `u.${name}`, reconnectMs: { first: 50, max: 200 } });

  afterEach(async () => {
    await closeGateways();
    await Promise.all(instances.splice(0).map((i) => i.close()));
    await Promise.all(processes.splice(0).map((p) => p.kill()));
  });

  it("shows a client on A the joins, typing, state and leaves of a user on B, each once", async () => {
    const [a, b] = [await instance(), await instance()];
    const ann = await user(a, "ann").join("doc");
    const seen: PresenceEvent[] = [];
    ann.on("change", ({ event }) => event && seen.push(event));
    const bob = await user(b, "bob").join("doc", { state: { status: "here" } });
    await eventually(() => ann.roster.members.some((m) => m.user === "bob"));
    bob.typing();
    await eventually(() => ann.roster.typing.includes("bob"));
    await bob.setState({ status: "away" });
    await eventually(
      () => ann.roster.members.find((m) => m.user === "bob")?.state?.status === "away",
    );
    await bob.leave();
    await eventually(() => seen.some((e) => e.type === "leave"));
    expect(seen.map((e) => `${e.type}:${e.user}`)).to.deep.equal([
      "join:bob",
      "typing-start:bob",
      "update:bob",
      "typing-stop:bob",
      "leave:bob",
    ]);
    expect(a.errors.concat(b.errors)).to.deep.equal([]);
  });

  it("announces a SIGKILLed instance's users gone once, from the other, a window and a grace after their last heartbeat", async function () {
    this.timeout(60_000);
    const admin = client();
    // B heartbeats its watcher often: it must not expire when the test moves time on.
    const b = await instance({ presence: { sweeper: { intervalMs: 100 }, heartbeatMs: 200 } });
    const a = await spawnFastify({
      redisUrl: redisUrl(),
      engine: ENGINE,
      presence: { sweeper: false, heartbeatMs: 200 },
    });
    processes.push(a);
    const watcher = await user(b, "watcher").join("crash");
    for (const name of ["ann", "bob"]) await user(a, name).join("crash");
    await eventually(() => watcher.roster.count === 3, 10_000, "three members");
    const leaves: PresenceEvent[] = [];
    watcher.on("change", ({ event }) => event?.type === "leave" && leaves.push(event));
    // Time stands still from here: it moves only when the test says.
    const last = await redisNow(admin);
    await stopClock(admin, b.rollcall, last);
    await eventually(async () => {
      const { members } = await b.rollcall.roster("crash");
      return members.every((m) => m.lastSeen === last);
    });
    await a.kill();
    const { presenceWindowMs: window, leaveGraceMs: grace } = ENGINE;
    /** Moves the stopped clock to `at` once the watcher was heartbeated at the time before. */
    const moveTo = async (before: number, at: number) => {
      await eventually(async () => {
        const { members } = await b.rollcall.roster("crash");
        return members.find((m) => m.user === "watcher")?.lastSeen === before;
      });
      await stopClock(admin, b.rollcall, at);
    };
    await moveTo(last, last + window - 1);
    await moveTo(last + window - 1, last + window);
    // B's sweeper takes the dead connections; their users are in the grace, not gone yet.
    await eventually(
      async () => {
        const roster = await b.rollcall.roster("crash");
        const dead = roster.members.filter((m) => m.user !== "watcher");
        return dead.every((m) => m.connections === 0 && m.leavingAt === last + window + grace);
      },
      10_000,
      "the connections expired",
    );
    expect(leaves).to.deep.equal([]);
    await moveTo(last + window, last + window + grace);
    await eventually(() => leaves.length === 2, 10_000, "two leaves");
    expect(leaves.map((e) => [e.user, e.type === "leave" && e.reason])).to.have.deep.members([
      ["ann", "expired"],
      ["bob", "expired"],
    ]);
    for (const leave of leaves) expect(leave.at - last).to.equal(window + grace);
    // Once: another sweep finds nothing, and a later join comes after no second leave.
    expect((await b.rollcall.sweepRoom("crash")).leaves).to.equal(0);
    await user(b, "carol").join("crash");
    await eventually(() => watcher.roster.members.some((m) => m.user === "carol"));
    expect(leaves).to.have.length(2);
  });

  it("refuses bad input with typed errors and statuses (a 401 challenged per RFC 6750), changing nothing", async () => {
    const a = await instance({ presence: { limits: { maxSocketsPerUser: 2 } } });
    // Options: a typed error from app.ready(), the plugin registered after @fastify/websocket.
    const rollcall = new Rollcall(client());
    for (const [options, withWebsocket] of [
      [{ rollcall, identify: () => null, path: "nope" }, true],
      [{ rollcall, identify: "me" }, true],
      [{ rollcall, identify: () => null, surprise: 1 }, true],
      [{ rollcall, identify: () => null }, false],
    ] as const) {
      const app = Fastify();
      if (withWebsocket) void app.register(websocket, { options: websocketOptions(rollcall) });
      void app.register(fastifyPresence, options as never);
      const error = await app.ready().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(Object.keys(options))).to.have.property(
        "code",
        "INVALID_OPTION",
      );
      await app.close().catch(() => undefined);
    }
    // No identity: 401 before any socket opens, challenged as the gateway's 401 is (RFC 6750: an
    // error code for a token refused, none without a token); a user's third socket: 429.
    const answer = (protocols: string[]) =>
      new Promise<[number, string | undefined]>((resolve) => {
        const ws = new WebSocket(a.url, protocols);
        ws.on("unexpected-response", (_request, response) =>
          resolve([response.statusCode ?? 0, response.headers["www-authenticate"]]),
        );
        ws.on("open", () => resolve([101, undefined]));
        ws.on("error", () => undefined);
      });
    expect(await answer([SUBPROTOCOL_V2])).to.deep.equal([401, 'Bearer realm="rollcall"']);
    expect(await answer([SUBPROTOCOL_V2, `${BEARER_PROTOCOL}nobody`])).to.deep.equal([
      401,
      'Bearer realm="rollcall", error="invalid_token", error_description="the token was refused"',
    ]);
    const ann = await user(a, "ann").join("doc");
    await user(a, "ann").join("doc");
    expect(await answer([SUBPROTOCOL_V2, `${BEARER_PROTOCOL}u.ann`])).to.deep.equal([
      429,
      undefined,
    ]);
    // Frames the protocol refuses, each an error frame; the socket stays open.
    const raw = new WebSocket(a.url, [SUBPROTOCOL_V2, `${BEARER_PROTOCOL}u.bob`]);
    const frames: { type: string; code?: string; ref?: string }[] = [];
    raw.on("message", (data: Buffer) =>
      frames.push(JSON.parse(data.toString()) as (typeof frames)[number]),
    );
    await new Promise((resolve) => raw.once("open", resolve));
    raw.send("not json");
    raw.send(JSON.stringify({ type: "join", room: "doc", user: "ann", ref: "1" }));
    raw.send(JSON.stringify({ type: "typing", room: "doc", ref: "2" }));
    raw.send(JSON.stringify({ type: "join", room: "a\u0000b", ref: "3" }));
    raw.send(JSON.stringify({ type: "refresh", token: "u.bob", ref: "4" }));
    await eventually(() => frames.filter((f) => f.type === "error").length === 5);
    expect(frames.filter((f) => f.type === "error").map((f) => f.code)).to.deep.equal([
      "BAD_FRAME",
      "BAD_FRAME",
      "NOT_JOINED",
      "INVALID_ID",
      "INVALID_TOKEN",
    ]);
    expect(raw.readyState).to.equal(WebSocket.OPEN);
    raw.close();
    expect(ann.roster.members.map((m) => m.user)).to.deep.equal(["ann"]);
  });

  it("survives a Redis outage: calls are refused UNAVAILABLE, nothing crashes, presence resumes", async () => {
    const unhandled = watchUnhandled();
    try {
      const own = await ownRedis();
      const a = await instance({
        redisUrl: own.url,
        redisOptions: { maxRetriesPerRequest: 0, retryStrategy: () => 50 },
      });
      const ann = await user(a, "ann").join("doc");
      await own.server.stop();
      const failed = await ann.setState({ mood: "offline" }).catch((e: unknown) => e);
      expect(failed).to.have.property("code", "UNAVAILABLE");
      await own.server.start();
      await eventually(async () => (await a.rollcall.count("doc").catch(() => null))?.users === 1);
      await ann.setState({ mood: "back" });
      await eventually(() => ann.roster.members[0]?.state?.mood === "back");
      expect(a.errors.length).to.be.greaterThan(0);
      expect(unhandled.count()).to.equal(0);
    } finally {
      unhandled.stop();
    }
  });
});
