// Nothing from outside is fatal: requests the URL parser refuses, hooks that throw, reject, hang
// or return junk, a client that ignores the close frame, and connections that never send a
// request, each against a gateway process of its own. After each, the process still answers
// and a user still gets in.
import { expect } from "chai";
import { SignJWT } from "jose";
import { BEARER_PROTOCOL, type ServerFrame } from "../../src/gateway/index.js";
import { Rollcall } from "../../src/index.js";
import { SECRET } from "../kit/gateway.js";
import { client } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";
import {
  openPeer,
  openStubbornPeer,
  rawExchange,
  rawUpgrade,
  sentTokens,
  startProcess,
  stopProcesses,
  tokenOf,
  writesNothing,
  type GatewayProcess,
} from "./harness.js";

/** The process answers, and a user with a good token (a hook's, or a JWT) still gets in and out. */
async function stillServes(gateway: GatewayProcess, hookToken?: string): Promise<void> {
  const peer = await openPeer(gateway.url, hookToken ?? (await tokenOf("canary")));
  expect((await peer.next("welcome")).type).to.equal("welcome");
  peer.ws.close();
  await eventually(() => peer.closed() !== undefined);
}

/** Request targets Node's URL parser refuses: each one used to end the process. */
const UNPARSEABLE = ["//x:99999/", "http://x:99999/presence", "http://[/presence", "//a%zz:1/x"];

describe("security: nothing from outside is fatal", function () {
  this.timeout(60_000);
  afterEach(() => stopProcesses(sentTokens));

  describe("requests", () => {
    for (const attach of [false, true]) {
      it(`answers 400 to an upgrade whose target the URL parser refuses, and lives on (${attach ? "attach" : "listen"})`, async () => {
        const gateway = await startProcess({ attach });
        await writesNothing(async () => {
          for (const path of UNPARSEABLE) {
            for (const upgrade of ["x", "websocket"]) {
              const answer = await rawUpgrade(gateway.port, {
                path,
                headers: { Upgrade: upgrade },
              });
              expect([path, upgrade, answer.status]).to.deep.equal([path, upgrade, 400]);
              expect(answer.body).to.equal("bad-request: the request target cannot be parsed\n");
              await answer.closed;
            }
          }
        });
        await stillServes(gateway);
      });
    }

    it("drops a connection that sends no complete request within requestTimeoutMs", async () => {
      const gateway = await startProcess({ limits: { requestTimeoutMs: 300 } });
      const silent = rawExchange(gateway.port, []);
      const partial = rawExchange(gateway.port, ["GET /presence HTTP/1.1\r\nHost: x\r\n"]);
      // The default was 10 s: 5 s is well past 300 ms on a loaded machine, and well short of it.
      for (const { done } of [silent, partial]) {
        const { closed } = await Promise.race([
          done,
          new Promise<{ closed: boolean }>((resolve) =>
            setTimeout(() => resolve({ closed: false }), 5_000),
          ),
        ]);
        expect(closed).to.equal(true);
      }
      await stillServes(gateway);
    });

    it("under 256 descriptors, 400 silent connections cannot lock a user out: the oldest make room", async () => {
      // A long request timeout: nothing but the lobby's bound can free the descriptors in time.
      const gateway = await startProcess({ limits: { requestTimeoutMs: 60_000 } }, 256);
      const base = (await gateway.stats()).fds;
      const silent = Array.from({ length: 400 }, () =>
        rawExchange(gateway.port, [], { ms: 60_000 }),
      );
      await eventually(() => silent.every((s) => s.socket.readyState !== "opening"));
      const peer = await openPeer(gateway.url, await tokenOf("ann"));
      expect((await peer.next("welcome")).type).to.equal("welcome");
      // The user got in while most silent connections were still held, not after they timed out.
      const held = silent.filter((s) => !s.socket.destroyed && s.socket.readyState === "open");
      expect(held.length).to.be.greaterThan(100);
      peer.ws.close();
      for (const s of silent) s.socket.destroy();
      let fds = Infinity;
      const deadline = Date.now() + 10_000;
      while (fds > base && Date.now() < deadline) fds = (await gateway.stats()).fds;
      expect(fds).to.be.at.most(base);
    });
  });

  describe("hooks", () => {
    it("refuses Origin: null with 403 when the origins function throws on it, and lives on", async () => {
      const gateway = await startProcess({ originsBySuffix: true });
      const jwt = await tokenOf("ann");
      const headers = (origin: string) => ({
        Origin: origin,
        "Sec-WebSocket-Protocol": `rollcall.v1, ${BEARER_PROTOCOL}${jwt}`,
      });
      const refused = await rawUpgrade(gateway.port, { headers: headers("null") });
      expect(refused.status).to.equal(403);
      await refused.closed;
      const allowed = await rawUpgrade(gateway.port, { headers: headers("https://a.example.com") });
      expect(allowed.status).to.equal(101);
      allowed.socket.destroy();
      expect((await gateway.stats()).errors.join("\n")).to.include("Invalid URL");
      await stillServes(gateway);
    });

    it("turns an authenticate hook's throw, rejection, junk or hang into a refusal, reported", async () => {
      const gateway = await startProcess({ mode: "hook", misbehave: true, authTimeoutMs: 200 });
      const expected: Record<string, number> = {
        throw: 401,
        reject: 401,
        junk: 401,
        junkstring: 401,
        junkobject: 401,
        junknull: 401,
        hang: 503,
      };
      await writesNothing(async () => {
        for (const [kind, status] of Object.entries(expected)) {
          const answer = await rawUpgrade(gateway.port, {
            headers: { "X-Hook": kind, Cookie: "session=ann" },
          });
          expect([kind, answer.status]).to.deep.equal([kind, status]);
          await answer.closed;
        }
      });
      const { errors } = await gateway.stats();
      // Every failure but the null (a plain refusal) is reported.
      expect(errors.length).to.be.at.least(6);
      await stillServes(gateway, "u.canary");
    });

    it("turns origins, authorize and capacity hooks that fail into refusals, reported", async () => {
      const gateway = await startProcess({
        mode: "hook",
        misbehave: true,
        authTimeoutMs: 200,
        errorListenerThrows: true,
      });
      for (const kind of ["throw", "reject", "hang", "junk", "junkstring"]) {
        const answer = await rawUpgrade(gateway.port, {
          headers: {
            "X-Hook-Origin": kind,
            Origin: "https://elsewhere.example",
            Cookie: "session=ann",
          },
        });
        expect([kind, answer.status]).to.deep.equal([kind, 403]);
        await answer.closed;
      }
      const peer = await openPeer(gateway.url, "u.ann");
      await peer.next("welcome");
      const cases: [string, string][] = [
        ["hook-throw-1", "INTERNAL"],
        ["hook-reject-1", "INTERNAL"],
        ["hook-junk-1", "INTERNAL"],
        ["hook-junkstring-1", "INTERNAL"],
        ["hook-hang-1", "UNAVAILABLE"],
        ["cap-throw-1", "INTERNAL"],
        ["cap-junkstring-1", "INTERNAL"],
        ["cap-reject-1", "INTERNAL"],
      ];
      await writesNothing(async () => {
        for (const [room, code] of cases) {
          peer.send({ type: "join", room, ref: room });
          const error = await peer.next("error", room);
          expect([room, error.type === "error" && error.code]).to.deep.equal([room, code]);
        }
      });
      peer.send({ type: "join", room: "plain", ref: "plain" });
      expect((await peer.next("snapshot", "plain")).type).to.equal("snapshot");
      expect(peer.closed()).to.equal(undefined);
      // The listener threw on every report: each became a warning, none a crash.
      const { errors } = await gateway.stats();
      expect(errors.filter((e) => e.includes("the error listener threw")).length).to.be.at.least(
        cases.length,
      );
      await stillServes(gateway, "u.canary");
    });
    it("turns a refresh hook's throw, rejection, junk or hang into INVALID_TOKEN; the socket keeps its expiry and its rooms", async () => {
      const gateway = await startProcess({ mode: "hook", misbehave: true, authTimeoutMs: 200 });
      const expires = Date.now() + 3_600_000;
      const peer = await openPeer(gateway.url, `u.ann.${expires}`);
      expect(await peer.next("welcome")).to.deep.include({ expiresAt: expires });
      peer.send({ type: "join", room: "plain", ref: "j" });
      await peer.next("snapshot", "j");
      const kinds = ["throw", "reject", "junk", "junkstring", "junkobject", "junknull", "hang"];
      await writesNothing(async () => {
        for (const kind of kinds) {
          peer.send({ type: "refresh", token: `hook-${kind}`, ref: kind });
          const error = await peer.next("error", kind);
          expect([kind, error.type === "error" && error.code]).to.deep.equal([
            kind,
            "INVALID_TOKEN",
          ]);
        }
      });
      const hang = peer.frames.find((f) => f.type === "error" && f.ref === "hang");
      expect(hang).to.have.property("message").that.includes("it took too long");
      // Still open, still in its room, still on its first token's expiry: a refresh that works
      // gets one of its own.
      expect(peer.closed()).to.equal(undefined);
      expect(peer.frames.filter((f) => f.type === "refreshed")).to.deep.equal([]);
      peer.send({ type: "typing", room: "plain", ref: "t" });
      await peer.next("ack", "t");
      peer.send({ type: "refresh", token: `u.ann.${expires + 1_000}`, ref: "ok" });
      expect(await peer.next("refreshed", "ok")).to.deep.include({ expiresAt: expires + 1_000 });
      // Every failure but the null (a plain refusal) is reported.
      const { errors } = await gateway.stats();
      expect(errors).to.deep.equal([
        "Error: the hook threw",
        "Error: the hook rejected",
        "HookError: the authenticate hook returned 42, not an identity or null",
        'HookError: the authenticate hook returned "yes", not an identity or null',
        "InvalidInputError: user id must be a non-empty string",
        "HookError: the authenticate hook took longer than 200 ms",
      ]);
      await stillServes(gateway, "u.canary");
    });

    it("leaves a room whose authorize hook throws, rejects, returns junk or hangs at a refresh", async () => {
      const gateway = await startProcess({ mode: "hook", misbehave: true, authTimeoutMs: 200 });
      // A token without expiry: `later-…` rooms let it in; the refreshed one (with an expiry) not.
      const peer = await openPeer(gateway.url, "u.ann");
      await peer.next("welcome");
      const kinds = ["throw", "reject", "junk", "junkstring", "hang"];
      const rooms = ["plain", ...kinds.map((kind) => `later-${kind}-1`)];
      for (const room of rooms) {
        peer.send({ type: "join", room, ref: room });
        await peer.next("snapshot", room);
      }
      peer.send({ type: "refresh", token: `u.ann.${Date.now() + 3_600_000}`, ref: "r" });
      await peer.next("refreshed", "r");
      const left = peer.frames.flatMap((f) =>
        f.type === "error" && f.ref === undefined ? [[f.code, f.room]] : [],
      );
      expect(left).to.deep.equal(kinds.map((kind) => ["FORBIDDEN", `later-${kind}-1`]));
      // Left for good: Redis counts ann in the plain room only.
      const rollcall = new Rollcall(client(), { leaveGraceMs: 0 });
      for (const room of rooms) {
        const { users } = await rollcall.count(room);
        expect([room, users]).to.deep.equal([room, room === "plain" ? 1 : 0]);
      }
      expect(peer.closed()).to.equal(undefined);
      const { errors } = await gateway.stats();
      expect(errors.length).to.be.at.least(kinds.length);
      await stillServes(gateway, "u.canary");
    });
  });

  describe("a socket the gateway closed", () => {
    it("handles no frame after it closes it with 4001 or 4003, and cuts it within about a second", async () => {
      // The process's clock and timers are fake (the cut's timeout among them): moved on at once.
      const gateway = await startProcess({ fakeClock: true, fakeTimeouts: true, pingMs: 600_000 });
      const bob = await openPeer(gateway.url, await tokenOf("bob"));
      bob.send({ type: "join", room: "doc", ref: "j" });
      await bob.next("snapshot", "j");

      const expires = Math.floor(Date.now() / 1000) + 60;
      const ann = await openStubbornPeer(gateway.port, await tokenOf("ann", {}, expires));
      const cat = await openStubbornPeer(gateway.port, await tokenOf("cat"));
      for (const peer of [ann, cat]) {
        peer.send({ type: "join", room: "doc", ref: "j" });
        await eventually(() => peer.frames.some((f) => f.type === "snapshot"));
      }
      const joined = (user: string) => (f: ServerFrame) =>
        f.type === "event" && f.event.user === user;
      await eventually(() => bob.frames.some(joined("ann")) && bob.frames.some(joined("cat")));
      const before = bob.frames.length;

      // Expired: the clock passes the token's exp (by less than the second the cut waits), the
      // gateway closes with 4001.
      await gateway.advance(expires * 1_000 - Date.now() + 500);
      await eventually(() => ann.closeCode() !== undefined);
      expect(ann.closeCode()).to.equal(4001);

      // Renamed: a refresh names another user, the gateway closes with 4003.
      cat.send({ type: "refresh", token: await tokenOf("mallory"), ref: "r" });
      await eventually(() => cat.closeCode() !== undefined);
      expect(cat.closeCode()).to.equal(4003);

      for (const peer of [ann, cat]) {
        peer.send({ type: "typing", room: "doc" });
        peer.send({ type: "state", room: "doc", state: { mood: "still here" } });
        peer.send({ type: "join", room: "elsewhere", ref: "late" });
      }
      // Cut off without waiting for a ping (none for ten minutes), a second after the close (as
      // docs/internet.md says): the clock moved on past it, the cut has happened; the wait is only
      // for the TCP close to come through (a cut that took ~9 s would still be 7 s away).
      await gateway.advance(1_100);
      await eventually(() => ann.gone() && cat.gone(), 3_000);
      const after = () =>
        bob.frames.slice(before).flatMap((f) => (f.type === "event" ? [f.event] : []));
      // Their leaves, once they were cut off; nothing they sent after the close.
      await eventually(() => after().filter((e) => e.type === "leave").length === 2);
      expect(
        after()
          .map((e) => [e.type, e.user])
          .sort(),
      ).to.deep.equal([
        ["leave", "ann"],
        ["leave", "cat"],
      ]);
      const keys = await client().keys("*elsewhere*");
      expect(keys).to.deep.equal([]);
      for (const peer of [ann, cat]) {
        expect(peer.frames.some((f) => "ref" in f && f.ref === "late")).to.equal(false);
      }
    });
  });

  describe("sizes, addresses, ids", () => {
    it("refreshes with a token as long as the upgrade takes, past the frame limit; refuses one past maxTokenBytes at both", async () => {
      const gateway = await startProcess();
      const long = await tokenOf("ann", { padding: "p".repeat(5_000) });
      expect(long.length).to.be.greaterThan(4_096);
      const peer = await openPeer(gateway.url, long, { via: "header" });
      await peer.next("welcome");
      peer.send({
        type: "refresh",
        token: await tokenOf("ann", { padding: "q".repeat(5_000) }),
        ref: "r",
      });
      expect((await peer.next("refreshed", "r")).type).to.equal("refreshed");
      const tooLong = await tokenOf("ann", { padding: "p".repeat(9_000) });
      const refused = await rawUpgrade(gateway.port, {
        headers: { Authorization: `Bearer ${tooLong}` },
      });
      expect(refused.status).to.equal(401);
      expect(refused.body).to.include("longer than 8192 bytes");
      peer.send({ type: "refresh", token: tooLong, ref: "r2" });
      const error = await peer.next("error", "r2");
      expect(error.type === "error" && error.code).to.equal("INVALID_TOKEN");
      expect(peer.closed()).to.equal(undefined);
    });

    it("measures a token in UTF-8 bytes at the upgrade and at a refresh, and refreshes one of the limit however it is escaped", async () => {
      const gateway = await startProcess({ mode: "hook" });
      // A hook token of ann (see server.ts) padded to `bytes` UTF-8 bytes, with quotes and
      // backslashes (two bytes each in JSON) and é (one UTF-16 unit, two UTF-8 bytes).
      const padded = (bytes: number, tag: string) => {
        const head = `u.ann...${tag}${'"\\'.repeat(2_100)}${"é".repeat(1_000)}`;
        return head + "x".repeat(bytes - Buffer.byteLength(head));
      };
      const atLimit = padded(8_192, "a");
      expect(Buffer.byteLength(atLimit)).to.equal(8_192);
      // Sent as a header: Latin-1 on the wire, é one byte there, two in UTF-8.
      const peer = await openPeer(gateway.url, atLimit, { via: "header" });
      await peer.next("welcome");
      // Escaped as JSON.stringify does: longer than the token plus 4 KiB.
      const another = padded(8_192, "b");
      expect(Buffer.byteLength(JSON.stringify(another))).to.be.greaterThan(8_192 + 4_096);
      peer.send({ type: "refresh", token: another, ref: "json" });
      expect((await peer.next("refreshed", "json")).type).to.equal("refreshed");
      // Every character escaped as \uXXXX, the most JSON can take: 6 bytes a byte of ASCII.
      const escaped = [...padded(8_192, "c")]
        .map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
        .join("");
      peer.send(`{"type":"refresh","token":"${escaped}","ref":"escaped"}`);
      expect((await peer.next("refreshed", "escaped")).type).to.equal("refreshed");
      // A byte more, though fewer UTF-16 units than the limit: refused at both.
      const over = padded(8_193, "d");
      expect(over.length).to.be.below(8_192);
      const refused = await openPeer(gateway.url, over, { via: "header" }).then(
        () => "opened",
        (error: Error) => error.message,
      );
      expect(refused).to.equal("refused: 401");
      peer.send({ type: "refresh", token: over, ref: "over" });
      const error = await peer.next("error", "over");
      expect(error).to.deep.include({ code: "INVALID_TOKEN" });
      expect(error.type === "error" && error.message).to.include("longer than 8192 bytes");
      expect(peer.closed()).to.equal(undefined);
    });

    it("counts an IPv6 /64 as one address for the per-address cap", async () => {
      const gateway = await startProcess({
        trustedProxies: ["127.0.0.1"],
        limits: { maxSocketsPerAddress: 5 },
      });
      const statuses: number[] = [];
      for (let i = 1; i <= 7; i++) {
        const answer = await rawUpgrade(gateway.port, {
          headers: {
            Authorization: `Bearer ${await tokenOf(`u${i}`)}`,
            "X-Forwarded-For": `2001:db8:1:2::${i.toString(16)}`,
          },
        });
        statuses.push(answer.status);
      }
      expect(statuses).to.deep.equal([101, 101, 101, 101, 101, 429, 429]);
      const otherNetwork = await rawUpgrade(gateway.port, {
        headers: {
          Authorization: `Bearer ${await tokenOf("u8")}`,
          "X-Forwarded-For": "2001:db8:1:3::1",
        },
      });
      expect(otherNetwork.status).to.equal(101);
    });

    it("refuses, with strict ids, user and room ids that render like others", async () => {
      const strict = await startProcess({ ids: "strict" });
      const sign = (user: string) =>
        new SignJWT({ rooms: ["*"] })
          .setProtectedHeader({ alg: "HS256" })
          .setSubject(user)
          .setExpirationTime("1h")
          .sign(new TextEncoder().encode(SECRET));
      const cyrillic = "\u0430nn"; // а, then Latin n n
      const refused = await rawUpgrade(strict.port, {
        headers: { Authorization: `Bearer ${await sign(cyrillic)}` },
      });
      expect(refused.status).to.equal(401);
      const peer = await openPeer(strict.url, await sign("ann"));
      await peer.next("welcome");
      const rooms = ["doc\u200b", "do\u202ec", "cafe\u0301", "ｄｏｃ", "doc\u00a01"];
      await writesNothing(async () => {
        for (const room of rooms) {
          peer.send({ type: "join", room, ref: room });
          const error = await peer.next("error", room);
          expect([room, error.type === "error" && error.code]).to.deep.equal([room, "INVALID_ID"]);
        }
      });
      for (const room of ["東京の部屋", "café", "doc 1"]) {
        peer.send({ type: "join", room, ref: room });
        expect((await peer.next("snapshot", room)).type).to.equal("snapshot");
      }
      // By default ids are kept verbatim: the same user gets in.
      const verbatim = await startProcess();
      const other = await openPeer(verbatim.url, await sign(cyrillic));
      expect((await other.next("welcome")).type === "welcome").to.equal(true);
    });
  });
});
