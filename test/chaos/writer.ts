/** A writer process of the chaos runner: random calls until told to stop, each result reported. */
import { Redis } from "ioredis";
import { Rollcall, RollcallError } from "../../src/index.js";
import { child, tell } from "./ipc.js";
import { Random } from "../kit/random.js";
import { sleep } from "../kit/wait.js";
import { randomCall } from "../kit/traffic.js";

const { config, stopped } = child();
const redis = new Redis(config.url);
redis.on("error", () => undefined); // each failed call says so; reconnecting is ioredis's job
const rc = new Rollcall(redis, config.engine);
const rng = new Random(config.seed);
let running = true;
void stopped.then(() => (running = false));

tell({ type: "ready" });
while (running) {
  try {
    tell({ type: "call", call: await randomCall(rc, rng, config.rooms, config.users) });
  } catch (error) {
    tell({ type: "failed", code: error instanceof RollcallError ? error.code : String(error) });
  }
  await sleep(rng.int(2, 12)); // pacing: a few hundred calls a second, not a flood
}
redis.disconnect();
process.disconnect();
