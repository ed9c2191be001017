/** A token bucket: `burst` at once, refilled at `perSecond`. */
export class RateLimit {
  private tokens: number;
  private at = performance.now();

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
  ) {
    this.tokens = burst;
  }

  take(): boolean {
    const now = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.perSecond);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** Sockets counted by a key (a user, an address), each key up to a cap. */
export class Tally<K> {
  private readonly counts = new Map<K, number>();

  constructor(private readonly cap: number) {}

  /** Counts one more for the key, or returns false when it has `cap` already. */
  add(key: K): boolean {
    const count = this.counts.get(key) ?? 0;
    if (count >= this.cap) return false;
    this.counts.set(key, count + 1);
    return true;
  }

  remove(key: K): void {
    const count = this.counts.get(key) ?? 0;
    if (count <= 1) this.counts.delete(key);
    else this.counts.set(key, count - 1);
  }
}

/**
 * Each user's sockets in this process, up to `maxSocketsPerUser`, and their one frame budget,
 * shared by all of them and kept while they have a socket.
 */
export class Budgets {
  private readonly users = new Map<string, RateLimit & { sockets: number }>();

  constructor(
    private readonly limits: {
      rateBurst: number;
      ratePerSecond: number;
      maxSocketsPerUser: number;
    },
  ) {}

  /** Counts a socket of the user and returns the user's budget, or undefined past the cap. */
  take(user: string): RateLimit | undefined {
    let entry = this.users.get(user);
    if (!entry) {
      entry = Object.assign(new RateLimit(this.limits.rateBurst, this.limits.ratePerSecond), {
        sockets: 0,
      });
      this.users.set(user, entry);
    }
    if (entry.sockets >= this.limits.maxSocketsPerUser) return undefined;
    entry.sockets += 1;
    return entry;
  }

  release(user: string): void {
    const entry = this.users.get(user);
    if (entry && --entry.sockets === 0) this.users.delete(user);
  }
}
