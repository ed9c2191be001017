/**
 * A sweeper process of the chaos runner: a Sweeper until told to stop, its passes reported (a
 * Sweeper's pass also drains every bucket's user changes into the users' status).
 */
import { Redis } from "ioredis";
import { Rollcall, Sweeper } from "../../src/index.js";
import { child, tell } from "./ipc.js";

const { config, stopped } = child();
const redis = new Redis(config.url);
redis.on("error", () => undefined); // failed passes are reported below
const sweeper = new Sweeper(new Rollcall(redis, config.engine), {
  intervalMs: 200,
  maxBackoffMs: 1_000,
});
sweeper.on("pass", (pass) => {
  const { leaves, typingStops, statusChanges } = pass;
  if (leaves + typingStops + statusChanges > 0) {
    tell({ type: "pass", leaves, typingStops, statusChanges });
  }
});
sweeper.on("failed", (error) => tell({ type: "sweep-failed", code: error.code }));
sweeper.start();
tell({ type: "ready" });
await stopped;
await sweeper.stop();
redis.disconnect();
process.disconnect();
