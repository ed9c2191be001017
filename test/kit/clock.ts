import { readFileSync } from "node:fs";
import type { Cluster, Redis } from "ioredis";
import { Layout } from "../../src/engine/layout.js";
import { replaceIncludes } from "../../src/engine/script.js";
import type { Rollcall } from "../../src/index.js";

const CLOCK = readFileSync(new URL("./lua/clock.lua", import.meta.url), "utf8");

// Every Rollcall a test makes runs its scripts on a clock the test can move (it is Redis's own
// until a test moves or stops it).
replaceIncludes({ clock: CLOCK });

/**
 * Rollcalls made from now on shard a room from 3 members (in 4 hashes) and gather it back at 2
 * (lua/include/shards.lua), or again at the sizes of production once `on` is false: so that a
 * test's few members go through both moves.
 */
export function smallShards(on: boolean): void {
  const shardSizes = "bucket.SHARDS_OF_BIG, bucket.SHARD_FROM, bucket.SHARD_UNTIL = 4, 3, 2\n";
  replaceIncludes(on ? { clock: CLOCK, shardSizes } : { clock: CLOCK });
}

type Client = Redis | Cluster;

function clockKeys(rollcall: Rollcall): string[] {
  const { prefix, buckets } = rollcall.settings;
  const layout = new Layout(prefix, buckets);
  return Array.from({ length: buckets }, (_, b) => `${layout.tag(b)}:test-clock`);
}

/**
 * Moves Redis's clock, as a deployment's scripts read it, forward by `ms` in every bucket: what
 * a test would otherwise wait for (a window, a grace) passes at once. Time goes on flowing. A
 * negative `ms` sets it back: what the scripts write then is that old to a process on Redis's
 * own clock (the CLI, run as a child process).
 */
export async function advanceClock(redis: Client, rollcall: Rollcall, ms: number): Promise<void> {
  await Promise.all(clockKeys(rollcall).map((key) => redis.incrby(key, ms)));
}

/** Stops the deployment's clock at `at` (ms since the epoch): time moves only when set again. */
export async function stopClock(redis: Client, rollcall: Rollcall, at: number): Promise<void> {
  await Promise.all(clockKeys(rollcall).map((key) => redis.set(key, `@${at}`)));
}

// Every key's expiry ARGV[1] ms closer; PEXPIREAT in the past removes the key.
const AGE_KEYS = `
for _, key in ipairs(redis.call('KEYS', '*')) do
  local at = redis.call('PEXPIRETIME', key)
  if at > 0 then redis.call('PEXPIREAT', key, at - tonumber(ARGV[1])) end
end`;

/**
 * Lets `ms` pass for all of Redis at once: the deployment's clock moves on, and so does every
 * key's TTL (which the clock does not move), keys whose TTL runs out going. One server only.
 */
export async function passTime(redis: Redis, rollcall: Rollcall, ms: number): Promise<void> {
  await advanceClock(redis, rollcall, ms);
  await redis.eval(AGE_KEYS, 0, ms);
}

/**
 * Runs the deployment's clock on Redis's own again: forward, from a clock stopped at a time
 * Redis's has passed since.
 */
export async function resumeClock(redis: Client, rollcall: Rollcall): Promise<void> {
  await Promise.all(clockKeys(rollcall).map((key) => redis.del(key)));
}
