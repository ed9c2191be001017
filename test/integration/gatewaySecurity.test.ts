import { expect } from "chai";
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT } from "jose";
import WebSocket from "ws";
import { AuthError, SUBPROTOCOL, type ServerFrame } from "../../src/gateway/index.js";
import { checkLimits, frameSizes } from "../../src/runtime/limits.js";
import { closeGateways, SECRET, startGateway, token } from "../kit/gateway.js";
import { caughtUp, listen } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

interface Opened {
  ws?: WebSocket;
  /** Every frame received, from the first (the welcome may come in the handshake's packet). */
  frames: ServerFrame[];
  status?: number;
  body?: string;
}

/** What a raw client sees of an upgrade: the socket, or the HTTP refusal. */
function open(url: string, bearer?: string): Promise<Opened> {
  const target = bearer === undefined ? url : `${url}?token=${encodeURIComponent(bearer)}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(target, [SUBPROTOCOL]);
    const frames: ServerFrame[] = [];
    ws.on("message", (data: Buffer) => frames.push(JSON.parse(data.toString()) as ServerFrame));
    ws.once("open", () => resolve({ ws, frames }));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ frames, status: res.statusCode, body }));
    });
    ws.once("error", reject);
  });
}

/** A raw socket that records every frame, and its close code. */
async function rawClient(url: string, user: string, claims: Record<string, unknown> = {}) {
  const { ws, frames } = await open(url, await token(user, claims));
  let closed: number | undefined;
  ws!.on("close", (code) => (closed = code));
  await eventually(() => frames.length > 0); // the welcome
  return {
    ws: ws!,
    frames,
    closed: () => closed,
    send: (frame: unknown) => ws!.send(typeof frame === "string" ? frame : JSON.stringify(frame)),
    errors: () => frames.filter((f) => f.type === "error"),
  };
}

const secret = new TextEncoder().encode(SECRET);

describe("gateway security", () => {
  afterEach(closeGateways);

  describe("refuses an upgrade before the socket opens", () => {
    it("without a token, with a bad signature, an expired token or an unsigned one", async () => {
      const { url } = await startGateway();
      const other = await new SignJWT({ rooms: ["*"] })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject("mallory")
        .sign(new TextEncoder().encode("another secret, also long enough"));
      const expired = await token("ann", {}, "-1s");
      const unsigned = new UnsecuredJWT({ rooms: ["*"] }).setSubject("mallory").encode();
      const noSubject = await new SignJWT({ rooms: ["*"] })
        .setProtectedHeader({ alg: "HS256" })
        .sign(secret);
      const refusals = await Promise.all(
        [undefined, "garbage", other, expired, unsigned, noSubject].map((t) => open(url, t)),
      );
      expect(refusals.map((r) => [r.status, r.body?.split(":")[0]])).to.deep.equal([
        [401, "no-token"],
        [401, "invalid-token"],
        [401, "invalid-token"],
        [401, "expired-token"],
        [401, "invalid-token"],
        [401, "invalid-token"],
      ]);
    });

    it("with a local JWKS: a token signed by its key passes, one signed by another key does not", async () => {
      const { publicKey, privateKey } = await generateKeyPair("ES256");
      const other = await generateKeyPair("ES256");
      const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" };
      const { url } = await startGateway({ jwt: { jwks: { keys: [jwk] } } });
      const sign = (key: Parameters<SignJWT["sign"]>[0]) =>
        new SignJWT({ rooms: ["doc"] })
          .setProtectedHeader({ alg: "ES256", kid: "k1" })
          .setSubject("ann")
          .setExpirationTime("1h")
          .sign(key);
      const good = await open(url, await sign(privateKey));
      expect(good.ws).to.be.instanceOf(WebSocket);
      good.ws!.close();
      expect((await open(url, await sign(other.privateKey))).status).to.equal(401);
    });

    it("as the authenticate hook says, and reports a hook that throws", async () => {
      const { url, gateway } = await startGateway({
        jwt: undefined,
        authenticate: (request) => {
          const who = new URL(request.url!, "http://x").searchParams.get("token");
          if (who === "boom") throw new Error("hook bug");
          if (who === "nobody") throw new AuthError(403, "refused", "not today");
          return who ? { user: who, rooms: ["doc"] } : null;
        },
      });
      const reported: Error[] = [];
      gateway.on("error", (e) => reported.push(e));
      expect((await open(url, "nobody")).status).to.equal(403);
      expect((await open(url, "boom")).status).to.equal(401);
      expect((await open(url)).status).to.equal(401);
      expect((await open(url, "ann")).ws).to.be.instanceOf(WebSocket);
      expect(reported.map((e) => e.message)).to.deep.equal(["hook bug"]);
    });
  });

  it("lets a socket into the rooms its token or the authorize hook allows, and no other", async () => {
    const { url } = await startGateway({ authorize: (identity, room) => room !== "team-7:secret" });
    const ann = await rawClient(url, "ann", { rooms: ["doc", "team-7:*"] });
    for (const room of ["doc", "elsewhere", "team-7:chat", "team-7:secret"]) {
      ann.send({ type: "join", room, ref: room });
    }
    await eventually(() => ann.frames.filter((f) => "ref" in f).length === 4);
    const replies = Object.fromEntries(
      ann.frames
        .filter((f) => "ref" in f)
        .map((f) => [(f as { ref: string }).ref, f.type === "error" ? f.code : f.type]),
    );
    expect(replies).to.deep.equal({
      doc: "snapshot",
      elsewhere: "FORBIDDEN",
      "team-7:chat": "snapshot",
      "team-7:secret": "FORBIDDEN",
    });
  });

  it("never lets a frame name another user, or carry anything the protocol does not know", async () => {
    const { url, rollcall } = await startGateway();
    const events = await listen([rollcall.channel("doc")]);
    const mallory = await rawClient(url, "mallory");
    mallory.send({ type: "join", room: "doc", user: "ann", ref: "1" });
    mallory.send({ type: "state", room: "doc", state: { s: 1 }, user: "ann", ref: "2" });
    mallory.send("{not json");
    mallory.send({ type: "dance", room: "doc" });
    mallory.send([1, 2]);
    mallory.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    mallory.send({ type: "join", room: "a\u0000b", ref: "3" });
    mallory.send({ type: "join", room: "doc", types: ["join", "nope"], ref: "4" });
    mallory.send({ type: "typing", room: "doc", ref: "5" });
    await eventually(() => mallory.errors().length === 9);
    expect(mallory.errors().map((f) => f.type === "error" && f.code)).to.deep.equal([
      "BAD_FRAME",
      "BAD_FRAME",
      "BAD_FRAME",
      "UNKNOWN_FRAME",
      "BAD_FRAME",
      "BAD_FRAME",
      "INVALID_ID",
      "INVALID_OPTION",
      "NOT_JOINED",
    ]);
    expect(mallory.closed()).to.equal(undefined);
    await caughtUp(events);
    expect(events).to.deep.equal([]);
    expect((await rollcall.roster("doc")).count).to.equal(0);
  });

  it("closes a socket that sends a frame over the size limit with 1009", async () => {
    const { url } = await startGateway({ limits: { maxFrameBytes: 256 } });
    const ann = await rawClient(url, "ann");
    ann.send({ type: "join", room: "x".repeat(300) });
    await eventually(() => ann.closed() !== undefined);
    expect(ann.closed()).to.equal(1009);
  });

  it("refuses a 300,000-key state at raised limits with 1009 before parsing it", async () => {
    const limits = { maxFrameBytes: 16_000_000, maxTokenBytes: 1_048_576 };
    const { url, rollcall } = await startGateway({ limits });
    const ann = await rawClient(url, "ann");
    const wide = Object.fromEntries(Array.from({ length: 300_000 }, (_, i) => [`k${i}`, i]));
    const frames = [
      JSON.stringify({ type: "join", room: "doc", state: wide, ref: "j" }),
      JSON.stringify({ type: "state", room: "doc", state: wide }),
    ];
    // Frames ws reads whole (a refresh may be that long), longer than any state frame may be.
    const sizes = frameSizes(checkLimits(limits), rollcall.settings.maxStateBytes);
    for (const text of frames) expect(text.length).to.be.within(sizes.frame, sizes.refresh);
    // Every JSON.parse of the test process (the gateway's among them) is seen.
    const parse = JSON.parse;
    const parsed: number[] = [];
    JSON.parse = (text: string, reviver?: Parameters<typeof parse>[1]): unknown => {
      parsed.push(text.length);
      return parse(text, reviver);
    };
    const peers = [ann, await rawClient(url, "bob")];
    try {
      frames.forEach((text, i) => peers[i]!.send(text));
      await eventually(() => peers.every((peer) => peer.closed() !== undefined));
    } finally {
      JSON.parse = parse;
    }
    expect(peers.map((peer) => peer.closed())).to.deep.equal([1009, 1009]);
    expect(parsed.filter((length) => length > sizes.frame)).to.deep.equal([]);
    expect((await rollcall.roster("doc")).count).to.equal(0);
  });

  it("answers a flood with one error, then closes it with 1008; Redis sees at most the burst", async () => {
    const { url, rollcall } = await startGateway({ limits: { rateBurst: 10, ratePerSecond: 1 } });
    const ann = await rawClient(url, "ann");
    ann.send({ type: "join", room: "doc" });
    await eventually(() => ann.frames.some((f) => f.type === "snapshot"));
    await rollcall.applyUserChanges(rollcall.bucketOf("doc")); // the join's user change
    await rollcall.redis.config("RESETSTAT");
    const start = performance.now();
    for (let i = 0; i < 200; i++) ann.send({ type: "typing", room: "doc" });
    await eventually(() => ann.closed() !== undefined);
    const seconds = (performance.now() - start) / 1000;
    expect(ann.closed()).to.equal(1008);
    expect(ann.errors().map((f) => f.type === "error" && f.code)).to.deep.equal(["RATE_LIMITED"]);
    const stats = String(await rollcall.redis.info("commandstats"));
    const scripts = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    // The burst, what the budget refilled (1 a second) while the frames came, however slowly the
    // machine sent and read them, and the leave of the closed socket with the users script call
    // that applies its user change: nothing after the close.
    expect(scripts).to.be.at.most(10 + Math.ceil(seconds) + 3);
  });

  it("refuses a socket more rooms than its limit", async () => {
    const { url } = await startGateway({ limits: { maxRoomsPerSocket: 2 } });
    const ann = await rawClient(url, "ann");
    for (const room of ["a", "b", "c"]) ann.send({ type: "join", room, ref: room });
    await eventually(() => ann.frames.filter((f) => "ref" in f).length === 3);
    expect(ann.errors().map((f) => f.type === "error" && [f.code, f.ref])).to.deep.equal([
      ["TOO_MANY_ROOMS", "c"],
    ]);
  });

  it("closes a slow consumer with 1013 instead of queueing without bound, and lets it go unread", async () => {
    const { gateway, url, rollcall } = await startGateway(
      { limits: { maxBufferedBytes: 64 * 1024 } },
      { presenceWindowMs: 60_000, typingWindowMs: 5_000, maxStateBytes: 65_536 },
    );
    const slow = await rawClient(url, "slow");
    slow.send({ type: "join", room: "doc" });
    await eventually(() => slow.frames.some((f) => f.type === "snapshot"));
    // The client stops reading: frames pile up in the kernel, then in the gateway.
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await rollcall.heartbeat("doc", "writer", "c");
    const big = "x".repeat(60_000);
    for (let i = 0; i < 400 && gateway.connections > 0; i++) {
      await rollcall.setState("doc", "writer", { big, i });
    }
    // Let go while the client still reads nothing (cut a second after its close frame).
    await eventually(() => gateway.connections === 0, 10_000);
    (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await eventually(() => slow.closed() !== undefined, 10_000);
    // 1013 when the close frame got out before the cut, else the cut itself (1006).
    expect([1013, 1006]).to.include(slow.closed());
  });

  it("terminates a socket that stops answering pings, and leaves its rooms", async () => {
    const { url, rollcall } = await startGateway({ pingMs: 100 });
    const events = await listen([rollcall.channel("doc")]);
    const { ws } = await open(url, await token("ghost"));
    // A peer gone without a close frame: it no longer answers pings.
    (ws as unknown as { pong(): void }).pong = () => undefined;
    ws!.send(JSON.stringify({ type: "join", room: "doc" }));
    await eventually(() => events.some((e) => e.type === "join"));
    (
      ws as unknown as { _receiver: { removeAllListeners(n: string): void } }
    )._receiver.removeAllListeners("ping");
    await eventually(() => events.some((e) => e.type === "leave"), 5_000);
    expect(events.map((e) => e.type)).to.deep.equal(["join", "leave"]);
  });
});
