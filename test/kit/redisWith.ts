import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RedisMemoryServer } from "redis-memory-server";
import { systemRedisServer } from "../../src/embedded.js";

const started = new Map<RedisMemoryServer, string>();

/**
 * A redis-server of the test's own, on loopback, started with these arguments (configuration a
 * running server cannot take, such as `--rename-command CONFIG ""`), in an empty directory of its
 * own (so it loads no dump.rdb another server left). stopRedisWith() ends them.
 */
export async function redisWith(args: string[]): Promise<string> {
  const systemBinary = systemRedisServer();
  const dir = mkdtempSync(join(tmpdir(), "rollcall-redis-"));
  const server = await RedisMemoryServer.create({
    instance: { args: ["--dir", dir, ...args] },
    ...(systemBinary ? { binary: { systemBinary } } : {}),
  });
  started.set(server, dir);
  return `redis://${await server.getHost()}:${await server.getPort()}`;
}

/** Stops every server redisWith() started. */
export async function stopRedisWith(): Promise<void> {
  await Promise.all(
    [...started].map(async ([server, dir]) => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }),
  );
  started.clear();
}
