import { integer, knownKeys } from "../protocol/options.js";

export interface Limits {
  /** Largest frame accepted; a bigger one closes the socket with 1009. Default 4 KiB. */
  maxFrameBytes: number;
  /** Rooms one socket may be in at once. Default 50. */
  maxRoomsPerSocket: number;
  /** Frames that reach Redis (join, leave, typing, typing-stop, state, heartbeat) a socket may
   * send at once, then `ratePerSecond` more each second (a token bucket). Defaults 20 and 5. */
  rateBurst: number;
  ratePerSecond: number;
  /** Bytes queued to a slow reader before its socket is closed with 1013. Default 1 MiB. */
  maxBufferedBytes: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxFrameBytes: 4_096,
  maxRoomsPerSocket: 50,
  rateBurst: 20,
  ratePerSecond: 5,
  maxBufferedBytes: 1_048_576,
};

export function checkLimits(limits: Partial<Limits> | undefined): Limits {
  const l = { ...DEFAULT_LIMITS, ...knownKeys(limits, Object.keys(DEFAULT_LIMITS)) };
  return {
    maxFrameBytes: integer("maxFrameBytes", l.maxFrameBytes, 64, 16_777_216),
    maxRoomsPerSocket: integer("maxRoomsPerSocket", l.maxRoomsPerSocket, 1, 100_000),
    rateBurst: integer("rateBurst", l.rateBurst, 1, 1_000_000),
    ratePerSecond: integer("ratePerSecond", l.ratePerSecond, 1, 1_000_000),
    maxBufferedBytes: integer("maxBufferedBytes", l.maxBufferedBytes, 1_024, 1_073_741_824),
  };
}

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
