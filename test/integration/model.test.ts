import { expect } from "chai";
import fc from "fast-check";
import { Layout } from "../../src/engine/layout.js";
import { Scripts } from "../../src/engine/script.js";
import { reconcile } from "../../src/engine/scripts/reconcile.js";
import { packSettings } from "../../src/engine/settings.js";
import { Rollcall, type HeartbeatOutcome } from "../../src/index.js";
import { parseEvent } from "../../src/protocol/events.js";
import { smallShards, stopClock } from "../kit/clock.js";
import { PresenceModel, type ModelResult, type ModelSettings } from "../kit/model.js";
import { client } from "../kit/redis.js";

const ROOMS = ["r0", "r1", "r2"];
const USERS = ["u0", "u1", "u2", "u3"];
const CONNS = ["c1", "c2", "c3"];
const STATES = ["", '{"s":0}', '{"s":1}'];
const PRESENCE = 10_000;
const TYPING = 2_000;
const START = 1_700_000_000_000;

const room = fc.constantFrom(...ROOMS);
const user = fc.constantFrom(...USERS);
const beat = fc.record({
  room,
  user,
  conn: fc.constantFrom(...CONNS),
  state: fc.constantFrom(...STATES),
  capacity: fc.constantFrom(0, 0, 1, 2, 3),
});
const action = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("heartbeat" as const), beat }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("heartbeatMany" as const),
      beats: fc.array(beat, { minLength: 1, maxLength: 6 }),
    }),
  },
  // A room's keys vanish unannounced (their key-level expiry): the bucket's counts are off until
  // a reconcile that starts afterwards ends.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("lose" as const), room }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("reconcileStep" as const),
      bucket: fc.constantFrom(0, 1),
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

type Beat = typeof beat extends fc.Arbitrary<infer B> ? B : never;

function options(b: Beat) {
  return {
    ...(b.state === "" ? {} : { state: JSON.parse(b.state) as Record<string, number> }),
    ...(b.capacity === 0 ? {} : { capacity: b.capacity }),
  };
}

function outcomeOf(r: HeartbeatOutcome): ModelResult {
  if (r.error) throw r.error;
  return { outcome: r.full ? "full" : r.joined ? "joined" : "refreshed", seq: r.event?.seq ?? 0 };
}

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
  const scripts = new Scripts(redis);
  // Per bucket: the reconcile under way (counting one room per call), and whether the counts are
  // off (keys lost since the last reconcile that started before the loss ended).
  const reconciles = new Map<number, { generation: number; named: number; start: number }>();
  const lost = new Map<number, number>();
  const s = rollcall.settings;
  const shared = [packSettings(s), ""];

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
        const { room, user, conn, state, capacity } = a.beat;
        const r = await rollcall.heartbeat(room, user, conn, options(a.beat));
        expectResult(step, outcomeOf(r), model.heartbeat(room, user, conn, state, capacity));
        break;
      }
      case "heartbeatMany": {
        const results = await rollcall.heartbeatMany(
          a.beats.map((b) => ({ room: b.room, user: b.user, connection: b.conn, ...options(b) })),
        );
        // A batch is applied room by room, rooms in the order they first come.
        const rooms = [...new Set(a.beats.map((b) => b.room))];
        const order = a.beats.map((b, k) => ({ b, k }));
        order.sort((x, y) => rooms.indexOf(x.b.room) - rooms.indexOf(y.b.room));
        for (const { b, k } of order) {
          expectResult(
            `${step}, entry ${k}`,
            outcomeOf(results[k]!),
            model.heartbeat(b.room, b.user, b.conn, b.state, b.capacity),
          );
        }
        break;
      }
      case "lose": {
        const { keys, bucket } = layout.room(a.room);
        if ((await redis.del(keys[0], keys[1])) > 0) lost.set(bucket, i);
        model.lose(a.room);
        break;
      }
      case "reconcileStep": {
        // One room per call, as a SCAN of the rooms' keys names them, then the call that ends it.
        const rooms = ROOMS.filter((r) => layout.room(r).bucket === a.bucket);
        const under = reconciles.get(a.bucket) ?? { generation: 0, named: 0, start: i };
        const finish = under.named === rooms.length;
        const next = await scripts.run(reconcile, layout.bucketKeys(a.bucket).slice(0, 2), shared, {
          generation: under.generation,
          rooms: rooms.slice(under.named, under.named + 1),
          finish,
        });
        expect(next.superseded, step).to.equal(false);
        if (!finish) {
          reconciles.set(a.bucket, {
            ...under,
            generation: next.generation,
            named: under.named + 1,
          });
        } else {
          reconciles.delete(a.bucket);
          if ((lost.get(a.bucket) ?? -1) < under.start) lost.delete(a.bucket);
        }
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
    // A join's or leave's roster is in no set order (every member fits in it here).
    const unordered = (events: object[]) =>
      events.map((e) => ("roster" in e ? { ...e, roster: [...(e.roster as string[])].sort() } : e));
    expect(unordered(await published()), `events of ${step}`).to.deep.equal(
      unordered(expected.sort((x, y) => key(x) - key(y))),
    );
    for (const r of ROOMS) {
      const { seq, count, members, typing } = await rollcall.roster(r);
      expect({ seq, count, members, typing }, `roster of ${r} after ${step}`).to.deep.equal(
        model.rosterOf(r),
      );
      expect(await rollcall.count(r), `count of ${r} after ${step}`).to.deep.equal(
        model.countOf(r),
      );
    }
    for (const { bucket, rooms, users, connections, typing } of await rollcall.stats()) {
      if (lost.has(bucket)) continue;
      expect({ rooms, users, connections, typing }, `bucket ${bucket} after ${step}`).to.deep.equal(
        model.bucketCounts(bucket),
      );
    }
  }
}

describe("the engine against a model of presence", () => {
  // Zsets as big ones are (a skiplist): a reconcile then scans the due index a room at a time,
  // so that calls change rooms between its chunks.
  before(async () => {
    await client().config("SET", "zset-max-listpack-entries", "0");
  });
  after(async () => {
    await client().config("SET", "zset-max-listpack-entries", "128");
  });

  const check = (runs: number) =>
    fc.assert(
      fc.asyncProperty(
        fc.constantFrom(0, 3_000),
        fc.array(action, { minLength: 50, maxLength: 50 }),
        run,
      ),
      {
        numRuns: Number(process.env.MODEL_RUNS ?? runs),
        ...(process.env.MODEL_SEED === undefined ? {} : { seed: Number(process.env.MODEL_SEED) }),
      },
    );

  it("agrees on results, events and rosters over random calls and time (seeded)", async function () {
    this.timeout(600_000);
    await check(200);
  });

  it("agrees the same with rooms sharded from 3 members and gathered back at 2", async function () {
    this.timeout(600_000);
    smallShards(true);
    try {
      await check(100);
    } finally {
      smallShards(false);
    }
  });
});
