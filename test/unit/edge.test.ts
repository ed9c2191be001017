// The pure pieces of the edge: calling users' hooks, counting addresses, strict ids, the state
// size bound, the lobby of connections that have not sent a request, the descriptor budget.
import { install } from "@sinonjs/fake-timers";
import { expect } from "chai";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { descriptorBudget, frameSizes, DEFAULT_LIMITS } from "../../src/runtime/limits.js";
import { Lobby } from "../../src/gateway/lobby.js";
import { ipv6Network } from "../../src/gateway/upgrade.js";
import { mayBeFollow, mayBeRefresh } from "../../src/protocol/frames.js";
import { checkId, strictIdProblem } from "../../src/protocol/ids.js";
import { encodeState } from "../../src/protocol/state.js";
import { callHook, callNow, HookError, isBoolean } from "../../src/runtime/hooks.js";

describe("calling a user's hook", () => {
  it("returns what a synchronous hook answers, and refuses junk or a promise", async () => {
    expect(callNow("origins", () => true, isBoolean, "a boolean")).to.equal(true);
    expect(() => callNow("origins", () => "yes", isBoolean, "a boolean"))
      .to.throw(HookError, 'the origins hook returned "yes", not a boolean')
      .with.property("failure", "returned");
    const thrown = new Error("the hook's own");
    const throwing = () => {
      throw thrown;
    };
    expect(() => callNow("origins", throwing, isBoolean, "a boolean")).to.throw(thrown);
    // A rejected promise, refused and swallowed: an unhandled rejection would end the process.
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const rejecting = () => Promise.reject(new Error("x"));
      expect(() => callNow("origins", rejecting, isBoolean, "a boolean")).to.throw(
        HookError,
        "must not be async",
      );
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).to.deep.equal([]);
  });

  it("awaits an async hook within its deadline, and times out a hang", async () => {
    const clock = install({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      expect(
        await callHook("authorize", () => Promise.resolve(false), isBoolean, "a boolean", 100),
      ).to.equal(false);
      const own = new Error("rejected");
      const rejected = await callHook(
        "authorize",
        () => Promise.reject(own),
        isBoolean,
        "a boolean",
        100,
      ).catch((e: unknown) => e);
      expect(rejected).to.equal(own);
      const thrown = await callHook(
        "authorize",
        () => {
          throw own;
        },
        isBoolean,
        "a boolean",
        100,
      ).catch((e: unknown) => e);
      expect(thrown).to.equal(own);
      const junk = await callHook("authorize", () => 1, isBoolean, "a boolean", 100).catch(
        (e: unknown) => e,
      );
      expect(junk).to.be.instanceOf(HookError).with.property("failure", "returned");
      const hang = callHook(
        "authorize",
        () => new Promise(() => undefined),
        isBoolean,
        "a boolean",
        100,
      );
      const settled = hang.catch((e: unknown) => e);
      await clock.tickAsync(100);
      expect(await settled)
        .to.be.instanceOf(HookError)
        .with.property("message", "the authorize hook took longer than 100 ms");
      expect(clock.countTimers()).to.equal(0);
    } finally {
      clock.uninstall();
    }
  });
});

describe("the per-address cap's addresses", () => {
  it("counts an IPv6 address as its network, written in full", () => {
    expect(ipv6Network("2001:db8:1:2::7", 64)).to.equal("2001:db8:1:2:0:0:0:0/64");
    expect(ipv6Network("2001:0db8:0001:0002:ffff:1:2:3", 64)).to.equal("2001:db8:1:2:0:0:0:0/64");
    expect(ipv6Network("2001:db8:1:2ff::1", 56)).to.equal("2001:db8:1:200:0:0:0:0/56");
    expect(ipv6Network("::1", 128)).to.equal("0:0:0:0:0:0:0:1/128");
    expect(ipv6Network("fe80::1%eth0", 64)).to.equal("fe80:0:0:0:0:0:0:0/64");
    expect(ipv6Network("64:ff9b::192.0.2.33", 96)).to.equal("64:ff9b:0:0:0:0:0:0/96");
    expect(ipv6Network("64:ff9b::192.0.2.33", 128)).to.equal("64:ff9b:0:0:0:0:c000:221/128");
  });
});

describe("strict ids", () => {
  it("refuses ids that render like others, and keeps the rest", () => {
    const refused: [string, string][] = [
      ["\u0430nn", "mixes letters of two scripts"],
      ["pay\u0440al", "mixes letters of two scripts"],
      ["ann\u200b", "holds an invisible or format character"],
      ["ann\u202e", "holds an invisible or format character"],
      ["ann\u00ad", "holds an invisible or format character"],
      ["a\u3000b", "is not in Unicode normal form NFKC"],
      ["e\u0301", "is not in Unicode normal form NFKC"],
      ["\uff41nn", "is not in Unicode normal form NFKC"],
      ["\ufb01le", "is not in Unicode normal form NFKC"],
      ["a\u2028b", "holds an invisible or format character"],
      ["a\ue000", "holds an invisible or format character"],
    ];
    for (const [id, problem] of refused)
      expect([id, strictIdProblem(id)]).to.deep.equal([id, problem]);
    for (const id of [
      "ann",
      "café",
      "Ωμέγα",
      "東京の部屋",
      "서울 방",
      "доклад-7",
      "user 42",
      "a.b_c:d-e",
    ]) {
      expect([id, strictIdProblem(id)]).to.deep.equal([id, undefined]);
    }
    expect(() => checkId("user", "\u0430nn", "strict"))
      .to.throw("user id mixes letters of two scripts (strict ids)")
      .with.property("code", "INVALID_ID");
    expect(checkId("user", "\u0430nn")).to.equal("\u0430nn");
  });
});

describe("the state size bound", () => {
  it("refuses a state of a million keys reading no more of it than the limit allows", () => {
    let reads = 0;
    const keys = Array.from({ length: 1_000_000 }, (_, i) => `k${i}`);
    const wide = new Proxy(Object.fromEntries(keys.slice(0, 10).map((k) => [k, 1])), {
      ownKeys: () => keys,
      getOwnPropertyDescriptor: () => ({ enumerable: true, configurable: true, value: 1 }),
      get: () => {
        reads += 1;
        return 1;
      },
    });
    expect(() => encodeState(wide, 1_024))
      .to.throw("more than 1024 bytes")
      .with.property("code", "INVALID_STATE");
    // Each key costs at least 5 characters: a few hundred reads, not a million.
    expect(reads).to.be.below(300);
  });

  it("keeps the frame the gateway reads within what a state of maxStateBytes needs", () => {
    const limits = { ...DEFAULT_LIMITS, maxFrameBytes: 16_000_000 };
    // A refresh frame: any token of maxTokenBytes (8 KiB), every byte escaped (6 bytes), 4 KiB more.
    // A follow-users frame: maxFollowFrameBytes (64 KiB), never less than any frame.
    expect(frameSizes(limits, 1_024)).to.deep.equal({
      frame: 10_240,
      refresh: 53_248,
      follow: 65_536,
    });
    expect(frameSizes(DEFAULT_LIMITS, 1_024)).to.deep.equal({
      frame: 4_096,
      refresh: 53_248,
      follow: 65_536,
    });
  });
});

describe("a frame past the frame limit", () => {
  it("is told to be no refresh from its first nested brace, unparsed", () => {
    const bytes = (text: string) => Buffer.from(text);
    const refresh = { type: "refresh", token: 'a "quoted" {token} [with] : and \\', ref: "r" };
    expect(mayBeRefresh(bytes(JSON.stringify(refresh)))).to.equal(true);
    expect(mayBeRefresh(bytes(JSON.stringify({ ...refresh, ref: undefined })))).to.equal(true);
    // A fourth member, a nested object or an array: no refresh, whatever follows.
    const wide = `{"type":"state","room":"doc","state":{"k0":0,${"x".repeat(1e6)}`;
    expect(mayBeRefresh(bytes(wide))).to.equal(false);
    expect(mayBeRefresh(bytes(`{"a":"","b":"","c":"","d":""}`))).to.equal(false);
    expect(mayBeRefresh(bytes(`{"type":"join","room":"doc","types":["join"]}`))).to.equal(false);
    // A byte of a multi-byte character is never a quote or a backslash.
    expect(mayBeRefresh(bytes(`{"token":"é\\"}`))).to.equal(true);
  });

  it("is told to be no follow-users from its second array or first nested brace, unparsed", () => {
    const bytes = (text: string) => Buffer.from(text);
    const follow = { type: "follow-users", users: ['a"[b', "{c}", "d:e"], ref: "r" };
    expect(mayBeFollow(bytes(JSON.stringify(follow)))).to.equal(true);
    const deep = `{"type":"state","room":"doc","state":{"k":[${"1,".repeat(1e6)}`;
    expect(mayBeFollow(bytes(deep))).to.equal(false);
    expect(mayBeFollow(bytes(`{"users":[["a"]]}`))).to.equal(false);
    expect(mayBeFollow(bytes(`{"a":"","b":"","c":"","users":[]}`))).to.equal(false);
  });
});

describe("the lobby of connections without a request", () => {
  it("makes room for a newcomer by dropping the connection waiting longest", () => {
    let busy = 0;
    const evicted: string[] = [];
    const lobby = new Lobby(
      () => busy,
      3,
      (reason) => evicted.push(reason),
    );
    const sockets = Array.from({ length: 5 }, () => new PassThrough());
    for (const socket of sockets.slice(0, 3)) lobby.arrived(socket);
    expect(lobby.size).to.equal(3);
    lobby.arrived(sockets[3]!);
    expect(sockets.map((s) => s.destroyed)).to.deep.equal([true, false, false, false, false]);
    // Served connections leave the lobby; open sockets count against the cap too.
    lobby.served(sockets[1]!);
    busy = 2;
    lobby.arrived(sockets[4]!);
    expect(sockets.map((s) => s.destroyed)).to.deep.equal([true, false, true, false, false]);
    expect(evicted).to.deep.equal(["evicted", "evicted"]);
    // The sockets and handshakes alone fill the cap: one waits past it, to be answered 503.
    busy = 3;
    const late = new PassThrough();
    const lobby2 = new Lobby(
      () => busy,
      3,
      () => undefined,
    );
    lobby2.arrived(late);
    expect([late.destroyed, lobby2.size]).to.deep.equal([false, 1]);
  });

  it("keeps at least 64 descriptors back from sockets, and 10 % of a large limit", () => {
    const limits = (soft: number) => {
      const file = join(tmpdir(), `limits-${soft}`);
      writeFileSync(
        file,
        `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 ${soft}                 files\n`,
      );
      return file;
    };
    expect(descriptorBudget(limits(256))).to.equal(192);
    expect(descriptorBudget(limits(1_024))).to.equal(921);
    expect(descriptorBudget(limits(65_536))).to.equal(58_982);
    expect(descriptorBudget(join(tmpdir(), "no-such-file"))).to.equal(10_000);
  });
});
