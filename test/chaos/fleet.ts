/**
 * A fleet writer of the bad-days runner (badDays.ts), serving one run per scenario: it holds
 * connections, each of a user of its own in a room drawn at random, and heartbeats all of them
 * every beat from a timer, as a gateway does, whether or not the last beat was answered: in one
 * heartbeatMany, or one heartbeat call each. A user joins with a state (sent until a call says
 * it is in). Now and then a connection is replaced by a new user's: it leaves, or goes silent and
 * expires. It reports when it held each connection, each join its calls reported, and each
 * refusal with its code.
 */
import { Redis } from "ioredis";
import { Rollcall, type HeartbeatResult } from "../../src/index.js";
import { serve, tell, told, type ChildConfig, type FleetCounts } from "./ipc.js";
import { codeOf } from "./observers.js";
import { Random } from "../kit/random.js";

interface Hold {
  room: string;
  user: string;
  /** When its first heartbeat went out, ms. */
  from: number;
  /** A call said it is in the room: its heartbeats carry no state any more. */
  in: boolean;
}

const CONNECTION = "c";

async function run(config: ChildConfig, stopped: Promise<void>): Promise<void> {
  const fleet = config.fleet!;
  const redis = new Redis(config.url);
  redis.on("error", () => undefined); // each failed call says so; reconnecting is ioredis's job
  const rc = new Rollcall(redis, config.engine);
  const rng = new Random(config.seed);
  const state = { name: fleet.name, profile: "x".repeat(fleet.stateBytes) };
  const holds = new Set<Hold>();
  const inFlight = new Set<Promise<void>>();
  let counts: FleetCounts = { answered: 0, refused: {} };
  let made = 0;

  const hold = () => {
    const user = `${fleet.name}-${made++}`;
    holds.add({ room: rng.pick(config.rooms), user, from: Date.now(), in: false });
  };
  // It stops heartbeating the connection: from now on, a leave of its user is no live client's.
  const release = (h: Hold) => {
    holds.delete(h);
    tell({ type: "held", room: h.room, user: h.user, from: h.from, to: Date.now() });
  };
  const refused = (op: string, error: unknown, n: number) => {
    const key = `${op} ${codeOf(error)}`;
    counts.refused[key] = (counts.refused[key] ?? 0) + n;
  };
  // A heartbeat's outcome: its result, or (heartbeatMany, per entry) the failure of its call.
  const settle = (h: Hold, outcome: HeartbeatResult | { error: unknown }) => {
    const { error } = outcome as { error?: unknown };
    if (error !== undefined) return refused("heartbeat", error, 1);
    const result = outcome as HeartbeatResult;
    counts.answered++;
    h.in = true;
    if (result.joined && result.event) {
      const { epoch, seq } = result.event;
      tell({ type: "joined", room: h.room, user: h.user, epoch, seq });
    }
  };
  const track = (call: Promise<void>) => {
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call));
  };
  const leave = (h: Hold) => {
    release(h);
    const call = rc.leave(h.room, h.user, CONNECTION);
    track(
      call.then(
        () => undefined,
        (error: unknown) => refused("leave", error, 1),
      ),
    );
  };

  const beat = () => {
    if (holds.size > 0 && rng.next() < fleet.churn) {
      const gone = rng.pick([...holds]);
      if (rng.next() < fleet.leaving) leave(gone);
      else release(gone);
      hold();
    }
    const list = [...holds];
    const options = (h: Hold) => (h.in ? undefined : { state });
    if (fleet.batch) {
      const entries = list.map((h) => ({
        room: h.room,
        user: h.user,
        connection: CONNECTION,
        ...options(h),
      }));
      track(
        rc.heartbeatMany(entries).then(
          (outcomes) => outcomes.forEach((outcome, i) => settle(list[i]!, outcome)),
          (error: unknown) => refused("heartbeat", error, list.length),
        ),
      );
    } else {
      for (const h of list) {
        track(
          rc.heartbeat(h.room, h.user, CONNECTION, options(h)).then(
            (result) => settle(h, result),
            (error: unknown) => refused("heartbeat", error, 1),
          ),
        );
      }
    }
    tell({ type: "beat", ...counts });
    counts = { answered: 0, refused: {} };
  };

  for (let i = 0; i < fleet.holds; i++) hold();
  beat();
  const timer = setInterval(beat, fleet.beatMs);
  await stopped;
  clearInterval(timer);
  for (const h of [...holds]) leave(h);
  while (inFlight.size > 0) await Promise.all(inFlight);
  await told({ type: "done", ...counts });
  redis.disconnect();
}

serve(run);
