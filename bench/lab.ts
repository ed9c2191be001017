import { Redis, type RedisOptions } from "ioredis";

/**
 * The Redis the bench runs on and every connection it opens, so that each is closed at the end
 * whatever happened. The bench flushes the database between sections: it refuses a Redis that
 * holds data.
 */
export class Lab {
  readonly admin: Redis;
  private readonly clients = new Set<Redis>();

  constructor(readonly url: string) {
    this.admin = this.connect({ connectionName: "bench-admin" });
  }

  /** A new connection: each stands for one server instance, or one subscriber. */
  connect(options: RedisOptions = {}): Redis {
    return this.track(new Redis(this.url, options));
  }

  /** Adopts a connection opened by ioredis itself (MONITOR opens its own). */
  track(client: Redis): Redis {
    this.clients.add(client);
    return client;
  }

  /** Closes a connection whose replies have all arrived. */
  release(client: Redis): void {
    this.clients.delete(client);
    client.disconnect();
  }

  /**
   * A full collection of Redis's Lua heap. Scripts leave garbage that later calls pay for (Redis
   * steps the collector every 50 calls): a measurement starts from a clean heap, so that it does
   * not pay for the set-up's garbage, nor for a previous run's.
   */
  async collectLuaGarbage(): Promise<void> {
    await this.admin.eval("collectgarbage('collect') return 0", 0);
  }

  async checkEmpty(): Promise<void> {
    const keys = await this.admin.dbsize();
    if (keys > 0) {
      throw new Error(
        `the Redis at ${this.url} holds keys (${keys}); the bench flushes it, so give it an empty one`,
      );
    }
  }

  async flush(): Promise<void> {
    await this.admin.flushdb();
  }

  /**
   * Deletes every kept reply (`{prefix:b}:r:<call>`): a call that changed something keeps its
   * reply for the replay window. They are transient, so a section that measures memory, or
   * counts keys, or must not pay for their expiry in the background, drops those of its set-up.
   * Returns how many there were.
   */
  async dropReplies(): Promise<number> {
    let dropped = 0;
    for await (const keys of this.admin.scanStream({ match: "{*}:r:*", count: 1_000 })) {
      const batch = keys as string[];
      if (batch.length > 0) dropped += await this.admin.del(...batch);
    }
    return dropped;
  }

  close(): void {
    for (const client of this.clients) client.disconnect();
    this.clients.clear();
  }
}
