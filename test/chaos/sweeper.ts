/** A sweeper process of the chaos runner: a Sweeper until told to stop, its passes reported. */
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
  if (pass.leaves + pass.typingStops > 0) {
    tell({ type: "pass", leaves: pass.leaves, typingStops: pass.typingStops });
  }
});
sweeper.on("failed", (error) => tell({ type: "sweep-failed", code: error.code }));
sweeper.start();
tell({ type: "ready" });
await stopped;
await sweeper.stop();
redis.disconnect();
process.disconnect();
