import { expect } from "chai";
import fc from "fast-check";
import { Layout } from "../../src/engine/layout.js";
import { Rollcall } from "../../src/index.js";
import { parseEvent } from "../../src/protocol/events.js";
import { stopClock } from "../support/clock.js";
import { PresenceModel, type ModelResult, type ModelSettings } from "../support/model.js";
import { client } from "../support/redis.js";

const ROOMS = ["r0", "r1", "r2"];
const USERS = ["u0", "u1", "u2", "u3"];
const CONNS = ["c1", "c2", "c3"];
const STATES = ["", '{"s":0}', '{"s":1}'];
const PRESENCE = 10_000;
const TYPING = 2_000;
const START = 1_700_000_000_000;

const room = fc.constantFrom(...ROOMS);
const user = fc.constantFrom(...USERS);
const action = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("heartbeat" as const),
      room,
      user,
      conn: fc.constantFrom(...CONNS),
      state: fc.constantFrom(...STATES),
      capacity: fc.constantFrom(0, 0, 1, 2, 3),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("leave" as const),
      room,
      user,
      conn: fc.constantFrom(...CONNS),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("startTyping" as const), room, user }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("stopTyping" as const), room, user }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("setState" as const),
      room,
      user,
      state: fc.constantFrom(...STATES.slice(1)),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("sweep" as const) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      // Around every window's edge, and anywhere in between.
      ms: fc.oneof(
        fc.constantFrom(1, TYPING - 1, TYPING, PRESENCE - 1, PRESENCE, PRESENCE + 1, 3_000, 3_001),
        fc.integer({ min: 0, max: 2 * PRESENCE }),
      ),
    }),
  },
);
type Action = typeof action extends fc.Arbitrary<infer A> ? A : never;

let runs = 0;

/** Runs the actions against Redis and the model, comparing after every step. */
async function run(graceMs: number, actions: Action[]): Promise<void> {
  const redis = client();
  const settings: ModelSettings = {
    presenceWindowMs: PRESENCE,
    typingWindowMs: TYPING,
    leaveGraceMs: graceMs,
    buckets: 2,
  };
  const prefix = `model${++runs}`;
  const rollcall = new Rollcall(redis, {
    ...settings,
    prefix,
    keyTtlMs: 600_000,
    logLength: 100_000,
  });
  const layout = new Layout(prefix, settings.buckets);
  const model = new PresenceModel(settings, START);
  await stopClock(redis, rollcall, START);
  const logged = new Map<number, string>();
  const epochs = new Map<number, string>();

  const published = async () => {
    const events = [];
    for (let b = 0; b < settings.buckets; b++) {
      const entries = await redis.xrange(layout.log(b), `(${logged.get(b) ?? "0-0"}`, "+");
      for (const [id, fields] of entries) {
        logged.set(b, id);
        const { epoch: e, ...event } = parseEvent(fields[1]!);
        delete (event as { v?: number }).v;
        if (!epochs.has(b)) epochs.set(b, e);
        expect(e, "one epoch per bucket").to.equal(epochs.get(b));
        events.push({ bucket: b, ...event });
      }
    }
    return events;
  };
  const expectResult = (step: string, actual: ModelResult, expected: ModelResult) =>
    expect(actual, step).to.deep.equal(expected);
  const seqOf = (event: { seq: number } | null) => event?.seq ?? 0;

  for (const [i, a] of actions.entries()) {
    const step = `step ${i}: ${JSON.stringify(a)}`;
    switch (a.kind) {
      case "heartbeat": {
        const r = await rollcall.heartbeat(a.room, a.user, a.conn, {
          ...(a.state === "" ? {} : { state: JSON.parse(a.state) as Record<string, number> }),
          ...(a.capacity === 0 ? {} : { capacity: a.capacity }),
        });
        const outcome = r.full ? "full" : r.joined ? "joined" : "refreshed";
        expectResult(
          step,
          { outcome, seq: seqOf(r.event) },
          model.heartbeat(a.room, a.user, a.conn, a.state, a.capacity),
        );
        break;
      }
      case "leave": {
        const r = await rollcall.leave(a.room, a.user, a.conn);
        const outcome = !r.removed ? "absent" : r.left ? "left" : r.leaving ? "leaving" : "removed";
        expectResult(step, { outcome, seq: seqOf(r.event) }, model.leave(a.room, a.user, a.conn));
        break;
      }
      case "startTyping": {
        const r = await rollcall.startTyping(a.room, a.user);
        const outcome = !r.present ? "absent" : r.started ? "started" : "refreshed";
        expectResult(step, { outcome, seq: seqOf(r.event) }, model.startTyping(a.room, a.user));
        break;
      }
      case "stopTyping": {
        const r = await rollcall.stopTyping(a.room, a.user);
        const outcome = r.stopped ? "stopped" : "notTyping";
        expectResult(step, { outcome, seq: seqOf(r.event) }, model.stopTyping(a.room, a.user));
        break;
      }
      case "setState": {
        const r = await rollcall.setState(
          a.room,
          a.user,
          JSON.parse(a.state) as Record<string, number>,
        );
        const outcome = !r.present ? "absent" : r.updated ? "updated" : "unchanged";
        expectResult(
          step,
          { outcome, seq: seqOf(r.event) },
          model.setState(a.room, a.user, a.state),
        );
        break;
      }
      case "sweep":
        for (const r of ROOMS) {
          const { connections, leaves, typingStops } = await rollcall.sweepRoom(r);
          expect({ connections, leaves, typingStops }, `${step} in ${r}`).to.deep.equal(
            model.sweep(r),
          );
        }
        break;
      case "advance":
        model.now += a.ms;
        await stopClock(redis, rollcall, model.now);
        break;
    }
    const expected = model.take().map((e) => ({ bucket: layout.room(e.room).bucket, ...e }));
    const key = (e: { bucket: number; seq: number }) => e.bucket * 1e9 + e.seq;
    expect(await published(), `events of ${step}`).to.deep.equal(
      expected.sort((x, y) => key(x) - key(y)),
    );
    for (const r of ROOMS) {
      const { seq, count, members, typing } = await rollcall.roster(r);
      expect({ seq, count, members, typing }, `roster of ${r} after ${step}`).to.deep.equal(
        model.rosterOf(r),
      );
    }
  }
}

describe("the engine against a model of presence", () => {
  it("agrees on results, events and rosters over random calls and time (seeded)", async function () {
    this.timeout(600_000);
    const seed = process.env.MODEL_SEED === undefined ? undefined : Number(process.env.MODEL_SEED);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(0, 3_000),
        fc.array(action, { minLength: 50, maxLength: 50 }),
        run,
      ),
      { numRuns: Number(process.env.MODEL_RUNS ?? 200), ...(seed === undefined ? {} : { seed }) },
    );
  });
});
