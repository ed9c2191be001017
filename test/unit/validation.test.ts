import { expect } from "chai";
import fc from "fast-check";
import {
  InvalidInputError,
  LogConsumer,
  Rollcall,
  Sweeper,
  type RollcallOptions,
} from "../../src/index.js";
import { id } from "../kit/arbitraries.js";
import { offlineRedis } from "../kit/offline.js";

/** Checks made before anything is sent: an engine on a client that never connects. */
const engine = (options?: RollcallOptions) => new Rollcall(offlineRedis(), options);

describe("validation without Redis", () => {
  it("rejects bad options with a typed error", () => {
    const bad: RollcallOptions[] = [
      { typingWindowMs: 45_000 },
      { presenceWindowMs: 2_000, typingWindowMs: 3_000 },
      { buckets: 0 },
      { buckets: 1.5 },
      { prefix: "a{b}" },
      { prefix: "" },
      { keyTtlMs: 60_000 },
      { eventRosterLimit: -1 },
      { bogus: 1 } as RollcallOptions,
    ];
    for (const options of bad) {
      expect(() => engine(options), JSON.stringify(options))
        .to.throw(InvalidInputError)
        .with.property("code", "INVALID_OPTION");
    }
  });

  it("never lets distinct rooms share a channel", () => {
    const rc = engine();
    fc.assert(
      fc.property(id, id, (a, b) => {
        fc.pre(a !== b);
        return rc.channel(a) !== rc.channel(b);
      }),
    );
  });

  it("refuses a sweeper unknown or out-of-range options with a typed error", () => {
    const rc = engine();
    for (const options of [{ interval: 5 }, { batch: 0 }, { intervalMs: 1.5 }]) {
      expect(() => new Sweeper(rc, options))
        .to.throw(InvalidInputError)
        .with.property("code", "INVALID_OPTION");
    }
  });

  it("refuses a log consumer without a log, and bad options, with typed errors", () => {
    expect(() => new LogConsumer(engine(), () => undefined, { group: "g" }))
      .to.throw()
      .with.property("code", "INVALID_OPTION");
    const rc = engine({ logLength: 1_000 });
    for (const options of [
      { group: "a b" },
      { group: "g", from: "middle" },
      { group: "g", batch: 0 },
    ]) {
      expect(() => new LogConsumer(rc, () => undefined, options as never))
        .to.throw()
        .with.property("code", "INVALID_OPTION");
    }
  });

  it("names its scripts after their source, so two releases on one client never mix", () => {
    const redis = offlineRedis();
    new Rollcall(redis);
    const names = Object.keys(redis).filter((k) => /^rollcall_heartbeat_[0-9a-f]{12}$/.test(k));
    expect(names).to.have.length(1);
  });
});

describe("metrics without a Meter", () => {
  it("record nothing, and create nothing", () => {
    const rc = engine();
    rc.metrics.add("rollcall.calls", 1);
    rc.metrics.record("rollcall.call.duration", 1);
    expect(rc.metrics).to.deep.include({ meter: undefined });
    expect((rc.metrics as unknown as { counters: Map<string, unknown> }).counters.size).to.equal(0);
  });
});
