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

  close(): void {
    for (const client of this.clients) client.disconnect();
    this.clients.clear();
  }
}
