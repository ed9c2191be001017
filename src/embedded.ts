import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { RedisMemoryServer } from "redis-memory-server";

/** The `redis-server` on PATH, if any: used instead of redis-memory-server's download. */
export function systemRedisServer(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, "redis-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

export interface EmbeddedRedis {
  readonly server: RedisMemoryServer;
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * A throwaway redis-server for the demo, the tests and the bench: the system binary when one is
 * on PATH, otherwise the one redis-memory-server downloads and caches.
 */
export async function startEmbeddedRedis(): Promise<EmbeddedRedis> {
  const systemBinary = systemRedisServer();
  const server = await RedisMemoryServer.create(systemBinary ? { binary: { systemBinary } } : {});
  const url = `redis://${await server.getHost()}:${await server.getPort()}`;
  return {
    server,
    url,
    stop: async () => {
      await server.stop();
    },
  };
}
