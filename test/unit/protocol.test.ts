import {
  FrameError,
  parseClientFrame,
  parseServerFrame,
  SUBPROTOCOLS,
} from "../../src/protocol/frames.js";
import { expect } from "chai";
import fc from "fast-check";
import { resolveSettings } from "../../src/engine/settings.js";
import { backoff } from "../../src/protocol/backoff.js";
import { RedisCallError } from "../../src/engine/errors.js";
import { InvalidInputError } from "../../src/protocol/errors.js";
import { checkEvent, parseEvent } from "../../src/protocol/events.js";
import { checkId, compareIds } from "../../src/protocol/ids.js";
import { knownKeys } from "../../src/protocol/options.js";
import { encodeState } from "../../src/protocol/state.js";

const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (error) {
    expect(error).to.be.instanceOf(InvalidInputError);
    return (error as InvalidInputError).code;
  }
  throw new Error("did not throw");
};

describe("ids", () => {
  it("accepts well-formed ids up to 256 UTF-8 bytes and refuses the rest with INVALID_ID", () => {
    expect(checkId("room", "doc-42")).to.equal("doc-42");
    expect(checkId("user", "é".repeat(128))).to.have.length(128);
    for (const bad of ["", "é".repeat(129), "a\u0000b", "tab\tbed", "\uD800", 42, null]) {
      expect(codeOf(() => checkId("user", bad))).to.equal("INVALID_ID");
    }
  });

  it("orders ids like their UTF-8 bytes", () => {
    const bytes = (s: string) => new TextEncoder().encode(s);
    const byBytes = (a: string, b: string) => {
      const [x, y] = [bytes(a), bytes(b)];
      for (let i = 0; i < Math.min(x.length, y.length); i++)
        if (x[i] !== y[i]) return x[i]! - y[i]!;
      return x.length - y.length;
    };
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), fc.string({ unit: "grapheme" }), (a, b) => {
        expect(Math.sign(compareIds(a, b))).to.equal(Math.sign(byBytes(a, b)));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("member state", () => {
  it("is canonical JSON: key order never makes a difference", () => {
    expect(encodeState({ b: 1, a: { d: [1, { f: 2, e: 3 }], c: null } }, 100)).to.equal(
      '{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}',
    );
  });

  it("refuses what JSON cannot carry, too much of it, and getters or proxies that throw", () => {
    const getter = Object.defineProperty({}, "x", {
      enumerable: true,
      get() {
        throw new Error("no");
      },
    });
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error("no keys");
        },
      },
    );
    const bad: unknown[] = [[1], "s", null, new Date(), { n: NaN }, { f: () => 1 }, getter, proxy];
    bad.push(
      { big: "x".repeat(100) },
      { sparse: new Array<number>(3) },
      {
        deep: JSON.parse("[".repeat(10) + "]".repeat(10)) as unknown,
      },
    );
    for (const state of bad) expect(codeOf(() => encodeState(state, 64))).to.equal("INVALID_STATE");
  });

  it("names the field JSON cannot carry, and what it holds", () => {
    const messages = [
      { status: undefined },
      { a: { "b c": [1, () => 1] } },
      { n: NaN },
      { tags: [1, , 3] }, // eslint-disable-line no-sparse-arrays -- the hole is the point
      { at: new Date(0) },
      { big: 1n },
    ].map((state) => {
      try {
        encodeState(state, 1_000);
      } catch (error) {
        return (error as Error).message;
      }
      return "accepted";
    });
    expect(messages).to.deep.equal([
      "member state field status is undefined, which JSON cannot carry",
      'member state field a["b c"][1] is a function, which JSON cannot carry',
      "member state field n is NaN, which JSON cannot carry",
      "member state field tags is a sparse array (tags[1] is a hole)",
      "member state field at is a Date, which JSON cannot carry",
      "member state field big is a bigint, which JSON cannot carry",
    ]);
  });
});

/** An event of schema version 2, as the tests below vary it. */
const TYPING = {
  v: 2,
  type: "typing-start",
  room: "r",
  user: "u",
  at: 1,
  epoch: "e",
  seq: 2,
  prev: 1,
};

describe("events", () => {
  const join = { ...TYPING, type: "join", state: null, roster: ["u"], count: 1 };

  it("parses a v2 event, with or without its log id", () => {
    expect(parseEvent(JSON.stringify(join))).to.deep.equal(join);
    expect(checkEvent({ ...join, log: "1-0" })).to.have.property("log", "1-0");
  });

  it("refuses anything else with UNEXPECTED_REPLY", () => {
    const bad = [
      "not json",
      "[]",
      "null",
      JSON.stringify({ ...join, v: 1 }),
      JSON.stringify({ ...join, epoch: "" }),
      JSON.stringify({ ...join, type: "dance" }),
      JSON.stringify({ ...join, type: "toString" }),
      JSON.stringify({ ...join, seq: -1 }),
      JSON.stringify({ ...join, roster: [1] }),
      JSON.stringify({ ...join, type: "leave", reason: "bored" }),
    ];
    for (const message of bad) {
      expect(() => parseEvent(message), message)
        .to.throw()
        .with.property("code", "UNEXPECTED_REPLY");
    }
  });
});

describe("options", () => {
  it("fills in defaults and checks how the windows relate", () => {
    expect(resolveSettings()).to.include({ presenceWindowMs: 45_000, buckets: 16, logLength: 0 });
    expect(resolveSettings(null as never)).to.include({ typingWindowMs: 5_000 });
    const bad = [
      { typingWindowMs: 45_000 },
      { keyTtlMs: 100_000 },
      { buckets: 0 },
      { presenceWindowMs: 1.5 },
      { prefix: "a b" },
      { nope: 1 },
    ];
    for (const options of bad)
      expect(codeOf(() => resolveSettings(options))).to.equal("INVALID_OPTION");
  });

  it("takes null as no options and refuses arrays and strings", () => {
    expect(knownKeys(null, ["a"])).to.deep.equal({});
    expect(codeOf(() => knownKeys([] as never, ["a"]))).to.equal("INVALID_OPTION");
    expect(codeOf(() => knownKeys("a" as never, ["a"]))).to.equal("INVALID_OPTION");
  });
});

describe("errors", () => {
  it("tells an outage from a script bug from another refusal, by what Redis and ioredis say", () => {
    const code = (message: string) => new RedisCallError("heartbeat", new Error(message)).code;
    const unavailable = [
      "Connection is closed.",
      "connect ECONNREFUSED 127.0.0.1:6379",
      "CLUSTERDOWN Hash slot not served",
      "TRYAGAIN Multiple keys request during rehashing of slot",
      "LOADING Redis is loading the dataset in memory",
      "READONLY You can't write against a read only replica. script: abc, on @user_script:1.",
      "Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys",
      'Reached the max retries per request limit (which is 20). Refer to "maxRetriesPerRequest"',
      "Command timed out",
      "BUSY Redis is busy running a script.",
    ];
    for (const message of unavailable) expect(code(message), message).to.equal("REDIS_UNAVAILABLE");
    const bugs = [
      "ERR user_script:1: Script attempted to access nonexistent global variable 'foo' script: abc, on @user_script:1.",
      "ERR user_script:12: attempt to compare nil with number script: abc, on @user_script:12.",
      "ERR Error compiling script (new function): user_script:3: '=' expected near 'x'",
    ];
    for (const message of bugs) expect(code(message), message).to.equal("SCRIPT_ERROR");
    expect(code("OOM command not allowed when used memory > 'maxmemory'.")).to.equal("REDIS_OOM");
    expect(code("WRONGTYPE Operation against a key holding the wrong kind of value")).to.equal(
      "REDIS_ERROR",
    );
  });
});

describe("backoff", () => {
  it("doubles up to its limit, and spreads retries with jitter", () => {
    const steps = [1, 2, 3, 4, 5, 6].map((n) => backoff(n, { firstMs: 100, maxMs: 1_000 }));
    expect(steps).to.deep.equal([100, 200, 400, 800, 1_000, 1_000]);
    const jittered = Array.from({ length: 50 }, () =>
      backoff(3, { firstMs: 100, maxMs: 1_000, jitter: true }),
    );
    expect(Math.min(...jittered)).to.be.at.least(200);
    expect(Math.max(...jittered)).to.be.at.most(400);
    expect(new Set(jittered).size).to.be.greaterThan(1);
  });
});

describe("gateway frames, versions 1 and 2", () => {
  const event = TYPING;

  it("reads version 2's events and count frames, and refuses them malformed", () => {
    const events = parseServerFrame(JSON.stringify({ type: "events", room: "r", events: [event] }));
    expect(events).to.deep.equal({ type: "events", room: "r", events: [event] });
    expect(parseServerFrame('{"type":"count","room":"r","count":3}')).to.include({ count: 3 });
    for (const bad of [
      { type: "events", room: "r", events: [{ ...event, seq: -1 }] },
      { type: "events", room: "r" },
      { type: "count", room: "r", count: "3" },
    ]) {
      expect(() => parseServerFrame(JSON.stringify(bad))).to.throw();
    }
  });

  it("takes watch and unwatch from a version 2 socket only", () => {
    expect(parseClientFrame('{"type":"watch","room":"r","ref":"w"}')).to.deep.equal({
      type: "watch",
      room: "r",
      ref: "w",
    });
    expect(() => parseClientFrame('{"type":"watch","room":"r","ref":"w"}', 1))
      .to.throw(FrameError)
      .with.property("code", "UNKNOWN_FRAME");
    expect(() => parseClientFrame('{"type":"unwatch"}')).to.throw(FrameError);
    expect(SUBPROTOCOLS).to.deep.equal(["rollcall.v2", "rollcall.v1"]);
  });
});
