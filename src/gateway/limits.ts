import { readFileSync } from "node:fs";
import { integer, knownKeys } from "../protocol/options.js";
import { RateLimit } from "../runtime/rateLimit.js";

export interface Limits {
  /** Largest frame accepted; a bigger one closes the socket with 1009. Default 4 KiB. */
  maxFrameBytes: number;
  /** Rooms one socket may be in at once. Default 50. */
  maxRoomsPerSocket: number;
  /** Frames one user may send at once over all their sockets of this process, then
   * `ratePerSecond` more each second (a token bucket). Defaults 20 and 5. */
  rateBurst: number;
  ratePerSecond: number;
  /** Bytes queued to a slow reader before its socket is closed with 1013. Default 1 MiB. */
  maxBufferedBytes: number;
  /**
   * Sockets this process holds, handshakes in flight included; past it an upgrade gets 503 and
   * Retry-After. Default 90 % of the process's soft descriptor limit (10,000 where it cannot be
   * read).
   */
  maxSockets: number;
  /** Sockets of one user in this process; past it 429 and Retry-After. Default 64, the most
   * connections of one user the engine holds in a room. */
  maxSocketsPerUser: number;
  /** Sockets from one client address (see `trustedProxies`); past it 429. Default 0: no cap, as
   * behind a proxy every client may share one address. */
  maxSocketsPerAddress: number;
}

/** The process's soft limit on open files (Linux: /proc/self/limits), or undefined. */
export function openFilesLimit(limits = "/proc/self/limits"): number | undefined {
  try {
    const soft = /^Max open files\s+(\d+)/m.exec(readFileSync(limits, "utf8"))?.[1];
    if (soft !== undefined) return Number(soft);
  } catch {
    // No procfs here.
  }
  return undefined;
}

/** 90 % of the soft limit on open files, or 10,000. */
export function descriptorBudget(limits?: string): number {
  const soft = openFilesLimit(limits);
  return soft === undefined ? 10_000 : Math.max(1, Math.floor(soft * 0.9));
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxFrameBytes: 4_096,
  maxRoomsPerSocket: 50,
  rateBurst: 20,
  ratePerSecond: 5,
  maxBufferedBytes: 1_048_576,
  maxSockets: descriptorBudget(),
  maxSocketsPerUser: 64,
  maxSocketsPerAddress: 0,
});

export function checkLimits(limits: Partial<Limits> | undefined): Limits {
  const l = { ...DEFAULT_LIMITS, ...knownKeys(limits, Object.keys(DEFAULT_LIMITS)) };
  return {
    maxFrameBytes: integer("maxFrameBytes", l.maxFrameBytes, 64, 16_777_216),
    maxRoomsPerSocket: integer("maxRoomsPerSocket", l.maxRoomsPerSocket, 1, 100_000),
    rateBurst: integer("rateBurst", l.rateBurst, 1, 1_000_000),
    ratePerSecond: integer("ratePerSecond", l.ratePerSecond, 1, 1_000_000),
    maxBufferedBytes: integer("maxBufferedBytes", l.maxBufferedBytes, 1_024, 1_073_741_824),
    maxSockets: integer("maxSockets", l.maxSockets, 1, 10_000_000),
    maxSocketsPerUser: integer("maxSocketsPerUser", l.maxSocketsPerUser, 1, 10_000_000),
    maxSocketsPerAddress: integer("maxSocketsPerAddress", l.maxSocketsPerAddress, 0, 10_000_000),
  };
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
    private readonly limits: Pick<Limits, "rateBurst" | "ratePerSecond" | "maxSocketsPerUser">,
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
