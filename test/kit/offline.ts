import { Redis } from "ioredis";

/**
 * A client that is never connected, for tests of what needs a client to exist but sends nothing
 * (option checks, names): lazyConnect opens no socket until a command, and none is sent.
 */
export function offlineRedis(): Redis {
  return new Redis({ lazyConnect: true });
}
