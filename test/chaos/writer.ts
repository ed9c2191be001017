/** A writer process of the chaos runner: random calls until told to stop, each result reported. */
import { Redis } from "ioredis";
import { Rollcall, RollcallError } from "../../src/index.js";
import { child, tell } from "./ipc.js";
import { Random } from "../kit/random.js";
import { sleep } from "../kit/wait.js";
import { randomCall } from "../kit/traffic.js";
import type { CallRecord } from "../kit/invariants.js";

const { config, stopped } = child();
const redis = new Redis(config.url);
redis.on("error", () => undefined); // each failed call says so; reconnecting is ioredis's job
const rc = new Rollcall(redis, config.engine);
const rng = new Random(config.seed);
/**
 * The share of calls that are a visitor's: few enough that a visitor's connections often all
 * expire before their next heartbeat.
 */
const VISITOR_CALLS = 0.25;
const visitors = config.visitors ?? [];

/** A call of a visitor (ipc.ts), or of the run's other users. */
function nextCall(): Promise<CallRecord> {
  if (visitors.length === 0 || rng.next() >= VISITOR_CALLS) {
    return randomCall(rc, rng, config.rooms, config.users);
  }
  const i = rng.int(0, visitors.length - 1);
  const rooms = [
    config.rooms[i % config.rooms.length]!,
    config.rooms[(i + 1) % config.rooms.length]!,
  ];
  return randomCall(rc, rng, rooms, [visitors[i]!]);
}
let running = true;
void stopped.then(() => (running = false));

tell({ type: "ready" });
while (running) {
  try {
    tell({ type: "call", call: await nextCall() });
  } catch (error) {
    tell({ type: "failed", code: error instanceof RollcallError ? error.code : String(error) });
  }
  await sleep(rng.int(2, 12)); // pacing: a few hundred calls a second, not a flood
}
redis.disconnect();
process.disconnect();
