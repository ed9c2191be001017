import type { RedisOptions } from "ioredis";

/** How long a call waits for Redis before it fails as REDIS_UNAVAILABLE. */
export const COMMAND_TIMEOUT_MS = 5_000;

/**
 * ioredis options that bound every call during an outage (docs/operations.md#calls-during-an-outage):
 * with ioredis's defaults a call waits for 20 reconnects (about 74 s against a dead Redis) and
 * for ever against a stopped one. `commandTimeout` fails a call that has no reply in 5 s, however
 * it waits; `maxRetriesPerRequest` 1 fails the queued calls at every second failed reconnect, so
 * none is left to run late; reconnects come quickly (at most 1 s apart), so a Redis back is used
 * within a second. A reply lost with its connection is still resent once, on the next connect.
 * Give them to your client (`new Redis(url, { ...REDIS_OPTIONS })`, a Cluster's `redisOptions`).
 */
export const REDIS_OPTIONS = Object.freeze({
  commandTimeout: COMMAND_TIMEOUT_MS,
  connectTimeout: COMMAND_TIMEOUT_MS,
  maxRetriesPerRequest: 1,
  retryStrategy: (times: number) => Math.min(100 * 2 ** (times - 1), 1_000),
}) satisfies RedisOptions;
