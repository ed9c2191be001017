// The gateway as a hostile client on the internet meets it: a gateway process of its own
// (./server.ts), attacked over raw sockets; each attack asserts the refusal or the close, and
// that Redis holds nothing new.
import { expect } from "chai";
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT } from "jose";
import { BEARER_PROTOCOL, SUBPROTOCOL } from "../../src/gateway/index.js";
import { SECRET } from "../kit/gateway.js";
import { eventually } from "../kit/wait.js";
import { Rollcall } from "../../src/index.js";
import { client } from "../kit/redis.js";
import {
  openPeer,
  rawUpgrade,
  redisWrites,
  sentTokens,
  startProcess,
  stopProcesses,
  tokenOf,
  until,
  writesNothing,
} from "./harness.js";

const secret = new TextEncoder().encode(SECRET);

async function signed(
  claims: Record<string, unknown>,
  build: (jwt: SignJWT) => SignJWT = (jwt) => jwt.setExpirationTime("1h"),
): Promise<string> {
  const jwt = await build(
    new SignJWT({ rooms: ["*"], ...claims }).setProtectedHeader({ alg: "HS256" }),
  ).sign(secret);
  sentTokens.push(jwt);
  return jwt;
}

const bearer = (jwt: string) => ({
  "Sec-WebSocket-Protocol": `rollcall.v1, ${BEARER_PROTOCOL}${jwt}`,
});

describe("security: a gateway process attacked over raw sockets", function () {
  this.timeout(60_000);
  afterEach(() => stopProcesses(sentTokens));

  describe("no socket leaks", () => {
    it("answers an upgrade to another path 404, a malformed one 400, and hangs up (listen)", async () => {
      const gateway = await startProcess();
      await writesNothing(async () => {
        const other = await rawUpgrade(gateway.port, { path: "/elsewhere" });
        expect(other.status).to.equal(404);
        await other.closed;
        const post = await rawUpgrade(gateway.port, { method: "POST" });
        expect(post.status).to.equal(400);
        await post.closed;
        const keyless = await rawUpgrade(gateway.port, { headers: { "Sec-WebSocket-Key": "" } });
        expect(keyless.status).to.equal(400);
        await keyless.closed;
      });
    });

    it("answers an upgrade to another path 404 and hangs up when attached to a server with no other upgrade listener", async () => {
      const gateway = await startProcess({ attach: true });
      const other = await rawUpgrade(gateway.port, { path: "/chat" });
      expect([other.status, other.body]).to.deep.equal([
        404,
        "not-found: no WebSocket endpoint here\n",
      ]);
      await other.closed;
      const peer = await openPeer(gateway.url, await tokenOf("ann"));
      expect((await peer.next("welcome")).type).to.equal("welcome");
      peer.ws.close();
    });

    it("under 256 descriptors, 2,000 unserved upgrades leave none behind, and a client still gets in", async () => {
      const gateway = await startProcess({}, 256);
      const warm = await openPeer(gateway.url, await tokenOf("warm"));
      warm.ws.close();
      await eventually(() => warm.closed() !== undefined);
      const base = (await gateway.stats()).fds;
      for (let batch = 0; batch < 40; batch++) {
        const answers = await Promise.all(
          Array.from({ length: 50 }, () => rawUpgrade(gateway.port, { path: "/nothing-here" })),
        );
        expect(answers.every((a) => a.status === 404)).to.equal(true);
        await Promise.all(answers.map((a) => a.closed));
      }
      const peer = await openPeer(gateway.url, await tokenOf("ann"));
      expect((await peer.next("welcome")).type).to.equal("welcome");
      peer.ws.close();
      await eventually(() => peer.closed() !== undefined);
      let fds = Infinity;
      const deadline = Date.now() + 10_000;
      while (fds > base && Date.now() < deadline) fds = (await gateway.stats()).fds;
      expect(fds).to.be.at.most(base);
    });

    it("refuses past its socket limit with 503 and Retry-After, counting handshakes in flight", async () => {
      const gateway = await startProcess({
        mode: "hook",
        holdHook: true,
        limits: { maxSockets: 2 },
      });
      const cookie = (user: string) => ({ Cookie: `session=${user}` });
      await writesNothing(async () => {
        // Two handshakes under way (the hook is slow): a third is refused at once.
        const slow = [
          rawUpgrade(gateway.port, { headers: cookie("a") }),
          rawUpgrade(gateway.port, { headers: cookie("b") }),
        ];
        await until(async () => (await gateway.stats()).handshakes === 2);
        const third = await rawUpgrade(gateway.port, { headers: cookie("c") });
        expect([third.status, third.headers["retry-after"]]).to.deep.equal([503, "5"]);
        await third.closed;
        gateway.release();
        expect((await Promise.all(slow)).map((a) => a.status)).to.deep.equal([101, 101]);
        const fourth = await rawUpgrade(gateway.port, { headers: cookie("d") });
        expect(fourth.status).to.equal(503);
        for (const a of await Promise.all(slow)) a.socket.destroy();
      });
    });

    it("gives a slow authenticate hook a deadline: 503 and Retry-After", async () => {
      // The hook never answers.
      const gateway = await startProcess({ mode: "hook", holdHook: true, authTimeoutMs: 200 });
      await writesNothing(async () => {
        const late = await rawUpgrade(gateway.port, { headers: { Cookie: "session=ann" } });
        expect([late.status, late.headers["retry-after"], late.body]).to.deep.equal([
          503,
          "5",
          "auth-timeout: authentication took too long\n",
        ]);
        await late.closed;
      });
    });

    it("drops a client that never finishes its request headers (slowloris)", async () => {
      const gateway = await startProcess();
      const { connect } = await import("node:net");
      const socket = connect(gateway.port, "127.0.0.1");
      socket.on("error", () => undefined);
      let closed = false;
      socket.on("close", () => (closed = true));
      socket.resume(); // reads the 408, then the end
      socket.write("GET /presence HTTP/1.1\r\nHost: x\r\n");
      await eventually(() => closed, 20_000);
      expect(closed).to.equal(true);
    });
  });

  describe("token lifetimes", () => {
    it("closes a socket with 4001 within a second of its token's exp; welcome says when", async () => {
      const gateway = await startProcess();
      const exp = Math.floor(Date.now() / 1000) + 2;
      const peer = await openPeer(gateway.url, await tokenOf("ann", {}, exp));
      const welcome = await peer.next("welcome");
      expect(welcome.type === "welcome" && welcome.expiresAt).to.equal(exp * 1000);
      peer.send({ type: "join", room: "doc", ref: "j" });
      await peer.next("snapshot", "j");
      await eventually(() => peer.closed() !== undefined, 5_000);
      const late = Date.now() - exp * 1000;
      expect(peer.closed()).to.equal(4001);
      expect(late).to.be.below(1_000);
      // The close left the room.
      const rollcall = new Rollcall(client(), { leaveGraceMs: 0 });
      await until(async () => (await rollcall.roster("doc")).count === 0);
    });

    it("refreshes a socket with a token of the same user: it outlives the first token", async () => {
      const gateway = await startProcess({ fakeClock: true });
      const exp = Math.floor(Date.now() / 1000) + 2;
      const peer = await openPeer(gateway.url, await tokenOf("ann", {}, exp));
      await peer.next("welcome");
      peer.send({ type: "refresh", token: await tokenOf("ann"), ref: "r" });
      const refreshed = await peer.next("refreshed", "r");
      expect(refreshed.type === "refreshed" && refreshed.expiresAt).to.be.above(
        (exp + 1_000) * 1000,
      );
      await gateway.advance(exp * 1000 + 1_500 - Date.now());
      expect(peer.closed()).to.equal(undefined);
      peer.send({ type: "join", room: "doc", ref: "j" });
      expect((await peer.next("snapshot", "j")).type).to.equal("snapshot");
      peer.ws.close();
    });

    it("leaves, with an error frame, the rooms a refreshed token no longer allows", async () => {
      const gateway = await startProcess();
      const peer = await openPeer(gateway.url, await tokenOf("ann", { rooms: ["doc", "team"] }));
      for (const room of ["doc", "team"]) {
        peer.send({ type: "join", room, ref: room });
        await peer.next("snapshot", room);
      }
      peer.send({ type: "refresh", token: await tokenOf("ann", { rooms: ["doc"] }), ref: "r" });
      await peer.next("refreshed", "r");
      const error = peer.frames.find((f) => f.type === "error");
      expect(error).to.deep.include({ code: "FORBIDDEN", room: "team" });
      expect(peer.closed()).to.equal(undefined);
      peer.send({ type: "typing", room: "team", ref: "t" });
      expect(await peer.next("error", "t")).to.deep.include({ code: "NOT_JOINED" });
    });

    it("closes a socket whose refresh names another user (4003), refuses a bad one (INVALID_TOKEN)", async () => {
      const gateway = await startProcess();
      const peer = await openPeer(gateway.url, await tokenOf("ann"));
      await peer.next("welcome");
      await writesNothing(async () => {
        peer.send({ type: "refresh", token: "garbage", ref: "bad" });
        expect(await peer.next("error", "bad")).to.deep.include({ code: "INVALID_TOKEN" });
        peer.send({ type: "refresh", token: await tokenOf("mallory"), ref: "other" });
        await eventually(() => peer.closed() !== undefined);
        expect(peer.closed()).to.equal(4003);
      });
    });

    it("refreshes through the authenticate hook, which gets only the new token", async () => {
      const gateway = await startProcess({ mode: "hook", fakeClock: true });
      const soon = Date.now() + 1_500;
      const peer = await openPeer(gateway.url, `u.ann.${soon}`);
      expect(await peer.next("welcome")).to.deep.include({ expiresAt: soon });
      const later = Date.now() + 3_600_000;
      peer.send({ type: "refresh", token: `u.ann.${later}`, ref: "r" });
      expect(await peer.next("refreshed", "r")).to.deep.include({ expiresAt: later });
      await gateway.advance(soon + 1_200 - Date.now());
      expect(peer.closed()).to.equal(undefined);
      peer.send({ type: "join", room: "doc", ref: "j" }); // answered on the same socket
      expect((await peer.next("snapshot", "j")).type).to.equal("snapshot");
      peer.ws.close();
    });

    it("refuses a token without exp, unless allowed", async () => {
      const strict = await startProcess();
      const forever = await signed({ sub: "ann" }, (jwt) => jwt);
      await writesNothing(async () => {
        const refused = await rawUpgrade(strict.port, { headers: bearer(forever) });
        expect([refused.status, refused.body]).to.deep.equal([
          401,
          "invalid-token: the token has no expiry (exp)\n",
        ]);
      });
      const lenient = await startProcess({ jwt: { allowNoExpiry: true } });
      const peer = await openPeer(lenient.url, forever);
      expect(await peer.next("welcome")).to.deep.include({ expiresAt: null });
      peer.ws.close();
    });
  });

  describe("origins", () => {
    it("refuses a cross-site page and Origin: null with 403, even with the visitor's cookie", async () => {
      const gateway = await startProcess({ mode: "hook" });
      const cookie = "session=ann";
      await writesNothing(async () => {
        for (const origin of [
          "https://evil.example",
          "null",
          `http://127.0.0.1:${gateway.port + 1}`,
        ]) {
          const hijack = await rawUpgrade(gateway.port, {
            headers: { Cookie: cookie, Origin: origin },
          });
          expect([hijack.status, hijack.body]).to.deep.equal([403, "origin: origin not allowed\n"]);
          await hijack.closed;
        }
      });
      const same = await rawUpgrade(gateway.port, {
        headers: { Cookie: cookie, Origin: `http://127.0.0.1:${gateway.port}` },
      });
      expect(same.status).to.equal(101);
      same.socket.destroy();
      const notBrowser = await rawUpgrade(gateway.port, { headers: { Cookie: cookie } });
      expect(notBrowser.status).to.equal(101);
      notBrowser.socket.destroy();
    });

    it("lets in the origins it is told to allow", async () => {
      const gateway = await startProcess({ mode: "hook", origins: ["https://app.example"] });
      const allowed = await rawUpgrade(gateway.port, {
        headers: { Cookie: "session=ann", Origin: "https://app.example" },
      });
      expect(allowed.status).to.equal(101);
      allowed.socket.destroy();
      const other = await rawUpgrade(gateway.port, {
        headers: { Cookie: "session=ann", Origin: "https://app.example.evil" },
      });
      expect(other.status).to.equal(403);
    });
  });

  describe("caps", () => {
    it("lets one user open 64 sockets by default, and refuses the 65th with 429 and Retry-After", async () => {
      const gateway = await startProcess();
      const jwt = await tokenOf("ann");
      const peers = await Promise.all(Array.from({ length: 64 }, () => openPeer(gateway.url, jwt)));
      await writesNothing(async () => {
        const extra = await rawUpgrade(gateway.port, { headers: bearer(jwt) });
        expect([extra.status, extra.headers["retry-after"], extra.body]).to.deep.equal([
          429,
          "10",
          "too-many-user-sockets: too many sockets for this user\n",
        ]);
        await extra.closed;
      });
      peers[0]!.ws.close();
      await eventually(() => peers[0]!.closed() !== undefined);
      await until(async () => (await gateway.stats()).connections === 63);
      const again = await rawUpgrade(gateway.port, { headers: bearer(jwt) });
      expect(again.status).to.equal(101);
      again.socket.destroy();
      for (const peer of peers) peer.ws.close();
    });

    it("caps sockets per client address when told to, behind a proxy it is told to trust", async () => {
      const gateway = await startProcess({
        limits: { maxSocketsPerAddress: 2 },
        trustedProxies: ["127.0.0.1"],
      });
      const from = async (address: string, user: string) =>
        rawUpgrade(gateway.port, {
          headers: {
            ...bearer(await tokenOf(user)),
            "X-Forwarded-For": `198.51.100.7, ${address}`,
          },
        });
      const open = [await from("203.0.113.5", "a"), await from("203.0.113.5", "b")];
      expect(open.map((a) => a.status)).to.deep.equal([101, 101]);
      await writesNothing(async () => {
        const third = await from("203.0.113.5", "c");
        expect([third.status, third.body]).to.deep.equal([
          429,
          "too-many-address-sockets: too many sockets from this address\n",
        ]);
      });
      expect((await from("203.0.113.6", "d")).status).to.equal(101);
    });

    it("spends one frame budget over all the sockets of a user", async () => {
      const gateway = await startProcess({ limits: { rateBurst: 10, ratePerSecond: 1 } });
      const jwt = await tokenOf("ann");
      const [a, b] = await Promise.all([openPeer(gateway.url, jwt), openPeer(gateway.url, jwt)]);
      for (let i = 0; i < 6; i++) a.send({ type: "heartbeat", ref: `a${i}` });
      for (let i = 0; i < 6; i++) b.send({ type: "heartbeat", ref: `b${i}` });
      const replies = () => [...a.frames, ...b.frames];
      const count = (type: string) => replies().filter((f) => f.type === type).length;
      // 12 frames, 10 in the budget (11 if a token came back meanwhile): one is refused.
      await eventually(() => count("error") >= 1 && count("ack") >= 10);
      const limited = replies().filter((f) => f.type === "error");
      expect(limited.map((f) => f.type === "error" && f.code)).to.deep.equal(["RATE_LIMITED"]);
      expect(count("ack")).to.be.at.most(11);
    });
  });

  describe("tokens out of URLs", () => {
    it("reads the token from a subprotocol entry and selects only rollcall.v1", async () => {
      const gateway = await startProcess();
      const jwt = await tokenOf("ann");
      await writesNothing(async () => {
        const opened = await rawUpgrade(gateway.port, { headers: bearer(jwt) });
        expect([opened.status, opened.headers["sec-websocket-protocol"]]).to.deep.equal([
          101,
          "rollcall.v1",
        ]);
        opened.socket.destroy();
      });
    });

    it("prefers the Authorization header, in any case, then the subprotocol, then the query", async () => {
      const gateway = await startProcess();
      const good = await tokenOf("ann");
      const statuses = [];
      for (const headers of [
        { Authorization: `bearer ${good}`, ...bearer("garbage") },
        { Authorization: "Bearer garbage", ...bearer(good) },
        { Authorization: `BEARER ${good}` },
      ]) {
        const a = await rawUpgrade(gateway.port, { headers });
        statuses.push(a.status);
        a.socket.destroy();
      }
      const query = await rawUpgrade(gateway.port, { path: `/presence?token=${good}` });
      statuses.push(query.status);
      query.socket.destroy();
      expect(statuses).to.deep.equal([101, 401, 101, 101]);
    });
  });

  describe("strict edges", () => {
    it("refuses with 426 an upgrade that offers no version it serves, saying which it serves", async () => {
      const gateway = await startProcess();
      const jwt = await tokenOf("ann");
      await writesNothing(async () => {
        for (const protocols of ["", "rollcall.v3", `rollcall.v3, ${BEARER_PROTOCOL}${jwt}`]) {
          const refused = await rawUpgrade(gateway.port, {
            headers: { "Sec-WebSocket-Protocol": protocols, Authorization: `Bearer ${jwt}` },
          });
          expect([refused.status, refused.headers["sec-websocket-protocol"]]).to.deep.equal([
            426,
            "rollcall.v2, rollcall.v1",
          ]);
          expect(refused.body).to.include("versions served: rollcall.v2, rollcall.v1");
          await refused.closed;
        }
      });
    });

    it("refuses a huge state before it is parsed, at a raised frame limit", async () => {
      const gateway = await startProcess({ limits: { maxFrameBytes: 16_000_000 } });
      const peer = await openPeer(gateway.url, await tokenOf("ann"));
      await peer.next("welcome");
      await writesNothing(async () => {
        // A state over maxStateBytes in a frame the limits allow: refused with its ref.
        const over = { text: "x".repeat(2_000) };
        peer.send({ type: "join", room: "doc", state: over, ref: "over" });
        expect(await peer.next("error", "over")).to.deep.include({ code: "INVALID_STATE" });
        // One longer than any state within maxStateBytes can be, whatever maxFrameBytes says:
        // closed with 1009 from the frame's header, before it is read.
        const wide = Object.fromEntries(Array.from({ length: 300_000 }, (_, i) => [`k${i}`, i]));
        peer.send({ type: "join", room: "doc", state: wide, ref: "big" });
        await eventually(() => peer.closed() !== undefined);
        expect(peer.closed()).to.equal(1009);
      });
    });

    it("challenges a 401 as RFC 6750 says: no error code without a token, invalid_token with a bad one", async () => {
      const gateway = await startProcess();
      const none = await rawUpgrade(gateway.port);
      expect([none.status, none.headers["www-authenticate"]]).to.deep.equal([
        401,
        'Bearer realm="rollcall"',
      ]);
      const expired = await rawUpgrade(gateway.port, {
        headers: {
          Authorization: `Bearer ${await tokenOf("ann", {}, Math.floor(Date.now() / 1000) - 60)}`,
        },
      });
      expect([expired.status, expired.headers["www-authenticate"]]).to.deep.equal([
        401,
        'Bearer realm="rollcall", error="invalid_token", error_description="the token has expired"',
      ]);
      const forged = await rawUpgrade(gateway.port, {
        headers: { Authorization: "Bearer not.a.token" },
      });
      expect(forged.headers["www-authenticate"]).to.equal(
        'Bearer realm="rollcall", error="invalid_token", error_description="the token is invalid"',
      );
    });

    it("challenges a 401 of an authenticate hook as RFC 6750 says: invalid_token when it refuses a token, bare without one", async () => {
      const gateway = await startProcess({ mode: "hook", misbehave: true });
      // No token (nor session cookie): the hook returns null, and the challenge has no error code.
      const none = await rawUpgrade(gateway.port);
      expect([none.status, none.headers["www-authenticate"]]).to.deep.equal([
        401,
        'Bearer realm="rollcall"',
      ]);
      // A token the hook refuses, by returning null or by failing, in the header or in the
      // subprotocol entry browsers send: that token was refused.
      const refused =
        'Bearer realm="rollcall", error="invalid_token", error_description="the token was refused"';
      for (const [kind, headers] of [
        ["junknull", { Authorization: "Bearer u.ann" }],
        ["junknull", { "Sec-WebSocket-Protocol": `${SUBPROTOCOL}, ${BEARER_PROTOCOL}u.ann` }],
        ["throw", { Authorization: "Bearer u.ann" }],
      ] as const) {
        const answer = await rawUpgrade(gateway.port, { headers: { ...headers, "X-Hook": kind } });
        expect([answer.status, answer.headers["www-authenticate"]], kind).to.deep.equal([
          401,
          refused,
        ]);
      }
    });
  });

  describe("what held, and must keep holding", () => {
    it("refuses alg none, another key, expired and not-yet-valid tokens, and odd subjects", async () => {
      const gateway = await startProcess();
      const attacks = [
        new UnsecuredJWT({ rooms: ["*"] }).setSubject("mallory").setExpirationTime("1h").encode(),
        await new SignJWT({ rooms: ["*"] })
          .setProtectedHeader({ alg: "HS256" })
          .setSubject("mallory")
          .setExpirationTime("1h")
          .sign(new TextEncoder().encode("another secret, just as long as the right one")),
        await tokenOf("ann", {}, "-10s"),
        await signed({ sub: "ann" }, (jwt) => jwt.setExpirationTime("1h").setNotBefore("10m")),
        await signed({ sub: "" }),
        await signed({ sub: 5 }),
        await signed({ sub: "a\u0000b" }),
        await signed({ sub: "x".repeat(300) }),
        await signed({ sub: "ann", rooms: "everything" }),
      ];
      sentTokens.push(...attacks);
      await writesNothing(async () => {
        const answers = [];
        for (const jwt of attacks)
          answers.push(await rawUpgrade(gateway.port, { headers: bearer(jwt) }));
        expect(answers.map((a) => [a.status, a.body.split(":")[0]])).to.deep.equal([
          [401, "invalid-token"],
          [401, "invalid-token"],
          [401, "expired-token"],
          [401, "invalid-token"],
          [401, "invalid-token"],
          [401, "invalid-token"],
          [401, "refused"],
          [401, "refused"],
          [401, "invalid-token"],
        ]);
      });
    });

    it("refuses an HS256 token signed with the public key of an RS256 JWKS (key confusion)", async () => {
      const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
      const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256" };
      const gateway = await startProcess({ jwks: { keys: [jwk] } });
      const good = await new SignJWT({ rooms: ["*"] })
        .setProtectedHeader({ alg: "RS256", kid: "k1" })
        .setSubject("ann")
        .setExpirationTime("1h")
        .sign(privateKey);
      const confused = await new SignJWT({ rooms: ["*"] })
        .setProtectedHeader({ alg: "HS256", kid: "k1" })
        .setSubject("mallory")
        .setExpirationTime("1h")
        .sign(new TextEncoder().encode(JSON.stringify(jwk)));
      sentTokens.push(good, confused);
      await writesNothing(async () => {
        expect((await rawUpgrade(gateway.port, { headers: bearer(confused) })).status).to.equal(
          401,
        );
      });
      const ok = await rawUpgrade(gateway.port, { headers: bearer(good) });
      expect(ok.status).to.equal(101);
      ok.socket.destroy();
    });

    it("keeps room patterns to what they say, and frames to the socket's own user", async () => {
      const gateway = await startProcess();
      const peer = await openPeer(
        gateway.url,
        await tokenOf("mallory", { rooms: ["team-7:*", "doc"] }),
      );
      await peer.next("welcome");
      await writesNothing(async () => {
        const tries: [string, unknown][] = [
          ["team-70", { type: "join", room: "team-70" }],
          ["team-7", { type: "join", room: "team-7" }],
          ["doc*", { type: "join", room: "doc*" }],
          ["docs", { type: "join", room: "docs" }],
          ["as-ann", { type: "join", room: "doc", user: "ann" }],
          ["state-ann", { type: "state", room: "doc", state: { s: 1 }, user: "ann" }],
          ["typing", { type: "typing", room: "doc" }],
        ];
        for (const [ref, frame] of tries) peer.send({ ...(frame as object), ref });
        peer.send("{not json");
        peer.ws.send(Buffer.from([1, 2, 3]), { binary: true });
        await eventually(() => peer.frames.filter((f) => f.type === "error").length === 9);
        expect(
          peer.frames.filter((f) => f.type === "error").map((f) => f.type === "error" && f.code),
        ).to.deep.equal([
          "FORBIDDEN",
          "FORBIDDEN",
          "FORBIDDEN",
          "FORBIDDEN",
          "BAD_FRAME",
          "BAD_FRAME",
          "NOT_JOINED",
          "BAD_FRAME",
          "BAD_FRAME",
        ]);
      });
      expect(peer.closed()).to.equal(undefined);
    });

    it("closes an oversize frame with 1009 and a flood with 1008, Redis seeing at most the burst", async () => {
      const gateway = await startProcess({
        limits: { maxFrameBytes: 256, rateBurst: 10, ratePerSecond: 1 },
      });
      const big = await openPeer(gateway.url, await tokenOf("big"));
      await writesNothing(async () => {
        big.send({ type: "join", room: "x".repeat(300) });
        await eventually(() => big.closed() !== undefined);
      });
      expect(big.closed()).to.equal(1009);
      const flood = await openPeer(gateway.url, await tokenOf("flood"));
      const before = await redisWrites();
      for (let i = 0; i < 200; i++) flood.send({ type: "heartbeat" });
      await eventually(() => flood.closed() !== undefined);
      expect(flood.closed()).to.equal(1008);
      expect(
        flood.frames.filter((f) => f.type === "error").map((f) => f.type === "error" && f.code),
      ).to.deep.equal(["RATE_LIMITED"]);
      // Heartbeats of a socket in no room touch nothing.
      expect(await redisWrites()).to.deep.equal(before);
    });

    it("closes a slow consumer with 1013 instead of queueing without bound, and lets it go unread", async () => {
      const engine = { leaveGraceMs: 0, maxStateBytes: 65_536 };
      const gateway = await startProcess({ engine, limits: { maxBufferedBytes: 64 * 1024 } });
      const slow = await openPeer(gateway.url, await tokenOf("slow"));
      slow.send({ type: "join", room: "doc", ref: "j" });
      await slow.next("snapshot", "j");
      // The client stops reading: frames pile up in the kernel, then in the gateway.
      const socket = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
      socket.pause();
      const rollcall = new Rollcall(client(), engine);
      await rollcall.heartbeat("doc", "writer", "c");
      const big = "x".repeat(60_000);
      for (let i = 0; i < 400 && slow.closed() === undefined; i++) {
        await rollcall.setState("doc", "writer", { big, i });
        if ((await gateway.stats()).connections === 0) break;
      }
      // The gateway let the socket go while the client still read nothing: a reader that does
      // not take its close frame within a second is cut off, and frees what was queued for it.
      await eventually(async () => (await gateway.stats()).connections === 0, 10_000);
      expect(slow.closed()).to.equal(undefined);
      socket.resume();
      await eventually(() => slow.closed() !== undefined, 10_000);
      // 1013 when the close frame got out before the cut, else the cut itself (1006).
      expect([1013, 1006]).to.include(slow.closed());
    });

    it("terminates a silent client that stops answering pings", async () => {
      const gateway = await startProcess({ pingMs: 100 });
      const peer = await openPeer(gateway.url, await tokenOf("ghost"));
      await peer.next("welcome");
      (
        peer.ws as unknown as { _receiver: { removeAllListeners(n: string): void } }
      )._receiver.removeAllListeners("ping");
      await eventually(() => peer.closed() !== undefined, 5_000);
      expect((await gateway.stats()).connections).to.equal(0);
    });
  });
});
