// A fuzz test of the gateway's edge (fast-check, seeded): generated request lines, targets,
// methods, header sets (duplicated, oversized, odd encodings) and truncations, over raw sockets,
// to a gateway whose hooks throw, reject, hang or return junk as each request asks; a request
// that upgrades may then send frames (joins, watches, follow-users, refreshes) whose `authorize`,
// `capacity`, `authorizeUsers` and refresh hooks misbehave as well. Invariants: the process lives, every connection is
// answered or closed (and every frame answered, or its socket closed), the descriptors come back,
// and Redis sees nothing. FUZZ_RUNS sets the number of batches (`make fuzz` runs many), FUZZ_SEED
// replays one run; the seed is printed either way.
import { expect } from "chai";
import fc from "fast-check";
import { BEARER_PROTOCOL } from "../../src/gateway/index.js";
import { eventually } from "../kit/wait.js";
import {
  maskedFrame,
  rawExchange,
  redisWrites,
  sentTokens,
  startProcess,
  stopProcesses,
  ServerFrameReader,
  type GatewayProcess,
} from "./harness.js";

/** How long a connection may wait for its answer: the request timeout, the hook deadline, slack. */
const REQUEST_TIMEOUT_MS = 500;
const ANSWER_WITHIN_MS = 8_000;

/** What a hook does other than answer well (server.ts): every frame below is refused. */
const FAILURES = ["throw", "reject", "hang", "junk", "junkstring", "junkobject", "junknull"];
const HOOK = fc.constantFrom(...FAILURES, "ok");
const FAIL = fc.constantFrom(...FAILURES);
/** A capacity hook's failures (its junk, 42, is a capacity). */
const CAP_FAIL = fc.constantFrom("throw", "reject", "hang", "junkstring", "junkobject");

/** A frame after the upgrade, each refused by a hook that fails (or answered by a refresh). */
const frame = fc.oneof(
  FAIL.map((kind) => ({ type: "join", room: `hook-${kind}-1` })),
  CAP_FAIL.map((kind) => ({ type: "join", room: `cap-${kind}-1` })),
  FAIL.map((kind) => ({ type: "watch", room: `hook-${kind}-1` })),
  FAIL.map((kind) => ({ type: "follow-users", users: [`hook-${kind}-1`, "bob"] })),
  FAIL.map((kind) => ({ type: "refresh", token: `hook-${kind}` })),
  fc.constantFrom({ type: "refresh", token: "u.ann" }, { type: "refresh", token: "nonsense" }),
);

const TOKEN_CHARS = fc.string({ unit: fc.constantFrom(..."abcXYZ019-._~+/=%"), maxLength: 40 });

/** Text in odd encodings: ASCII, Latin-1, UTF-8 beyond it, controls, lone surrogates. */
const oddText = (maxLength: number) =>
  fc.oneof(
    fc.string({ maxLength }),
    fc.string({ unit: "binary", maxLength }),
    fc.string({
      unit: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)),
      maxLength,
    }),
    fc.string({
      unit: fc.constantFrom("\ud800", "\udfff", "é", "\u202e", "\u200b", "\u0000"),
      maxLength,
    }),
  );

const method = fc.oneof(
  fc.constantFrom(
    "GET",
    "POST",
    "PUT",
    "HEAD",
    "OPTIONS",
    "CONNECT",
    "DELETE",
    "PATCH",
    "get",
    "PRI",
  ),
  fc.string({ unit: fc.constantFrom(..."GETPOSX \t"), maxLength: 8 }),
);

const target = fc.oneof(
  fc.constantFrom(
    "/presence",
    "/presence?token=u.ann",
    "/presence?token=",
    "/presence#x",
    "/elsewhere",
    "*",
    "//x:99999/",
    "http://x:99999/presence",
    "http://[/presence",
    "//a%zz:1/x",
    "http://127.0.0.1/presence",
    "/%00",
    "/presence/../presence",
    "",
  ),
  TOKEN_CHARS.map((t) => `/presence?token=${t}`),
  oddText(60).map((t) => `/${t}`),
  fc.nat({ max: 20_000 }).map((n) => `/${"p".repeat(n)}`),
);

const version = fc.constantFrom(
  "HTTP/1.1",
  "HTTP/1.0",
  "HTTP/2.0",
  "HTTP/9.9",
  "http/1.1",
  "",
  "HTTP/1.1 extra",
);

const header: fc.Arbitrary<[string, string]> = fc.oneof(
  fc.constantFrom<[string, string]>(
    ["Host", "127.0.0.1"],
    ["Host", ""],
    ["Connection", "Upgrade"],
    ["Connection", "keep-alive, Upgrade"],
    ["Connection", "close"],
    ["Upgrade", "websocket"],
    ["Upgrade", "WebSocket"],
    ["Upgrade", "x"],
    ["Upgrade", "h2c"],
    ["Sec-WebSocket-Version", "13"],
    ["Sec-WebSocket-Version", "8"],
    ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
    ["Sec-WebSocket-Key", "short"],
    ["Sec-WebSocket-Protocol", "rollcall.v2"],
    ["Sec-WebSocket-Protocol", "rollcall.v1, rollcall.v2"],
    ["Sec-WebSocket-Protocol", `rollcall.v2, ${BEARER_PROTOCOL}u.ann`],
    ["Sec-WebSocket-Protocol", `rollcall.v2, ${BEARER_PROTOCOL}`],
    ["Origin", "null"],
    ["Origin", "https://a.example.com"],
    ["Origin", "not a url"],
    ["Cookie", "session=ann"],
    ["Cookie", "session="],
    ["Authorization", "Bearer u.bob"],
    ["Authorization", "Bearer"],
    ["Authorization", "Basic YTpi"],
    ["X-Forwarded-For", "2001:db8::1, 10.0.0.1"],
    ["Content-Length", "5"],
    ["Content-Length", "-1"],
    ["Content-Length", "99999999999999999999"],
    ["Transfer-Encoding", "chunked"],
    ["Transfer-Encoding", "gzip, chunked"],
    ["Expect", "100-continue"],
  ),
  HOOK.map((kind): [string, string] => ["X-Hook", kind]),
  HOOK.map((kind): [string, string] => ["X-Hook-Origin", kind]),
  TOKEN_CHARS.map((t): [string, string] => ["Authorization", `Bearer u.${t}`]),
  TOKEN_CHARS.map((t): [string, string] => [
    "Sec-WebSocket-Protocol",
    `rollcall.v2, ${BEARER_PROTOCOL}${t}`,
  ]),
  fc.tuple(oddText(20), oddText(80)),
  fc.nat({ max: 20_000 }).map((n): [string, string] => ["X-Big", "b".repeat(n)]),
);

/** One connection: its request's bytes, whether (and where) they are cut, and how it ends. */
const anyRequest = fc.record({
  method,
  target,
  version,
  headers: fc.array(header, { maxLength: 16 }),
  body: fc.option(oddText(200), { nil: undefined }),
  encoding: fc.constantFrom<BufferEncoding>("latin1", "utf8"),
  cut: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
  pieces: fc.integer({ min: 1, max: 3 }),
  end: fc.boolean(),
  /** Frames it sends if it is upgraded (none: it hangs up at once). */
  after: fc.array(frame, { maxLength: 4 }),
});
/** An upgrade the gateway lets in (among others, a few headers apart), which then sends frames. */
const upgrade = fc.record({
  method: fc.constant("GET"),
  target: fc.constant("/presence"),
  version: fc.constant("HTTP/1.1"),
  headers: fc
    .tuple(
      fc.constantFrom<[string, string]>(
        ["Cookie", "session=ann"],
        ["Authorization", "Bearer u.bob"],
        ["Sec-WebSocket-Protocol", `rollcall.v1, ${BEARER_PROTOCOL}u.cat`],
      ),
      fc.constantFrom("rollcall.v2", "rollcall.v1"),
      fc.array(header, { maxLength: 2 }),
    )
    .map(([identity, protocol, extra]): [string, string][] => [
      ["Host", "127.0.0.1"],
      ["Connection", "Upgrade"],
      ["Upgrade", "websocket"],
      ["Sec-WebSocket-Version", "13"],
      ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
      ["Sec-WebSocket-Protocol", protocol],
      identity,
      ...extra,
    ]),
  body: fc.constant(undefined),
  encoding: fc.constant<BufferEncoding>("latin1"),
  cut: fc.constant(undefined),
  pieces: fc.integer({ min: 1, max: 3 }),
  end: fc.constant(false),
  after: fc.array(frame, { minLength: 1, maxLength: 4 }),
});
const connection = fc.oneof(
  { arbitrary: anyRequest, weight: 3 },
  { arbitrary: upgrade, weight: 1 },
);
type Connection = typeof anyRequest extends fc.Arbitrary<infer C> ? C : never;

function bytesOf(c: Connection): Buffer {
  const lines = [
    `${c.method} ${c.target} ${c.version}`,
    ...c.headers.map(([n, v]) => `${n}: ${v}`),
  ];
  const text = `${lines.join("\r\n")}\r\n\r\n${c.body ?? ""}`;
  const bytes = Buffer.from(text, c.encoding);
  return c.cut === undefined ? bytes : bytes.subarray(0, Math.floor(bytes.length * c.cut));
}

function piecesOf(bytes: Buffer, count: number): Buffer[] {
  const size = Math.ceil(bytes.length / count) || 1;
  const pieces: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) pieces.push(bytes.subarray(at, at + size));
  return pieces;
}

/** What a run did: connections upgraded, frames they sent. */
const tally = { upgraded: 0, frames: 0 };

/**
 * Sends a batch of connections at once; each must be answered (or upgraded) or closed. An
 * upgraded one sends its frames, each with a ref, and hangs up once each is answered: one that
 * is not (nor closed by the gateway) stays open until ANSWER_WITHIN_MS, and fails.
 */
async function attack(gateway: GatewayProcess, batch: Connection[]): Promise<void> {
  const exchanges = batch.map((c) => {
    const exchange = rawExchange(gateway.port, piecesOf(bytesOf(c), c.pieces), {
      end: c.end,
      ms: ANSWER_WITHIN_MS,
    });
    const replies = new ServerFrameReader();
    const refs = c.after.map((_, i) => `f${i}`);
    let head = Buffer.alloc(0);
    let upgraded = false;
    exchange.socket.on("data", (chunk: Buffer) => {
      if (!upgraded) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf("\r\n\r\n");
        if (end < 0 || !head.toString("latin1").startsWith("HTTP/1.1 101")) return;
        upgraded = true;
        tally.upgraded += 1;
        tally.frames += c.after.length;
        for (const [i, f] of c.after.entries()) {
          exchange.socket.write(maskedFrame(JSON.stringify({ ...f, ref: refs[i] })));
        }
        chunk = head.subarray(end + 4);
      }
      replies.read(chunk);
      const answered = (ref: string) => replies.frames.some((f) => "ref" in f && f.ref === ref);
      // Answered (a socket in no room writes nothing more): the client hangs up.
      if (refs.every(answered)) exchange.socket.destroy();
    });
    return exchange;
  });
  const outcomes = await Promise.all(exchanges.map((e) => e.done));
  outcomes.forEach(({ data, closed }, i) => {
    const c = batch[i]!;
    const upgraded = data.startsWith("HTTP/1.1 101");
    const answered = closed || (upgraded && c.after.length === 0);
    expect(
      answered,
      `no answer nor close for ${JSON.stringify(bytesOf(c).toString("latin1").slice(0, 300))}` +
        (upgraded ? ` then ${JSON.stringify(c.after)}` : ""),
    ).to.equal(true);
  });
  // Alive: it answers its own channel.
  await gateway.stats();
}

describe("security: a fuzz test of the gateway's edge", function () {
  this.timeout(900_000);
  afterEach(() => stopProcesses(sentTokens));

  it("lives through generated requests and misbehaving hooks, answering or closing each, leaking nothing (seeded)", async () => {
    const seed =
      process.env.FUZZ_SEED === undefined ? Date.now() % 2 ** 31 : Number(process.env.FUZZ_SEED);
    const runs = Number(process.env.FUZZ_RUNS ?? 15);
    console.log(`      fuzz seed ${seed} (FUZZ_SEED=${seed} replays it), ${runs} batches`);
    const gateways = await Promise.all(
      [false, true].map((attach) =>
        startProcess(
          {
            mode: "hook",
            misbehave: true,
            attach,
            // Users' status on: a follow-users frame reaches the authorizeUsers hook.
            engine: { userStatus: true },
            authTimeoutMs: 200,
            hostTimeoutMs: REQUEST_TIMEOUT_MS,
            limits: {
              requestTimeoutMs: REQUEST_TIMEOUT_MS,
              maxSocketsPerUser: 10_000,
              // Every frame is answered, none dropped past a budget: the invariant checks each.
              rateBurst: 1_000_000,
            },
          },
          1_024,
        ),
      ),
    );
    const bases = await Promise.all(gateways.map(async (g) => (await g.stats()).fds));
    const before = await redisWrites();
    let cases = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(connection, { minLength: 10, maxLength: 30 }),
        async (attached, batch) => {
          cases += batch.length;
          await attack(gateways[attached ? 1 : 0]!, batch);
        },
      ),
      { seed, numRuns: runs, endOnFailure: true },
    );
    console.log(
      `      ${cases} connections (${tally.upgraded} upgraded, sending ${tally.frames} frames), 0 deaths`,
    );
    for (const [i, gateway] of gateways.entries()) {
      await eventually(
        async () => (await gateway.stats()).fds <= bases[i]!,
        10_000,
        "descriptors back",
      );
    }
    expect(await redisWrites()).to.deep.equal(before);
  });
});
