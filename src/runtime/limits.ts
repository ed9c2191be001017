import { readFileSync } from "node:fs";
import { integer, knownKeys } from "../protocol/options.js";

export interface Limits {
  /** Largest frame accepted; a bigger one closes the socket with 1009. Default 4 KiB. A refresh
   * frame may be as long as its token allows (6 × `maxTokenBytes` + 4 KiB: escaped, at worst). */
  maxFrameBytes: number;
  /** Longest bearer token in UTF-8 bytes, at the upgrade and in a refresh frame alike; a longer
   * one is refused (401 invalid-token, or INVALID_TOKEN). Default 8 KiB, the header line most
   * proxies pass. */
  maxTokenBytes: number;
  /** Largest `follow-users` frame (up to 1,000 user ids): 64 KiB by default holds a thousand ids
   * of up to 60 ASCII characters; raise it for longer ids. A bigger one closes the socket with
   * 1009. At least `maxFrameBytes`. */
  maxFollowFrameBytes: number;
  /** Rooms one socket may be in at once. Default 50. */
  maxRoomsPerSocket: number;
  /** Frames one user may send at once over all their sockets of this process, then
   * `ratePerSecond` more each second (a token bucket). Defaults 20 and 5. */
  rateBurst: number;
  ratePerSecond: number;
  /** Bytes queued to a slow reader before its socket is closed with 1013. Default 1 MiB. */
  maxBufferedBytes: number;
  /**
   * Sockets this process holds, handshakes in flight (and, with `listen()`, connections that
   * have not sent their request) included; past it an upgrade gets 503 and Retry-After. Default
   * the process's soft descriptor limit less 10 % (at least 64) for everything else; 10,000
   * where it cannot be read.
   */
  maxSockets: number;
  /** Sockets of one user in this process; past it 429 and Retry-After. Default 64, the most
   * connections of one user the engine holds in a room. */
  maxSocketsPerUser: number;
  /** Sockets from one client address (see `trustedProxies`); past it 429. Default 0: no cap, as
   * behind a proxy every client may share one address. */
  maxSocketsPerAddress: number;
  /** The per-address cap counts an IPv6 address as its network of this many bits. Default 64. */
  ipv6PrefixBits: number;
  /**
   * With `listen()`: how long a connection may take to send its whole request; connections not
   * yet upgraded count against `maxSockets`, the oldest dropped first when it is reached.
   * Default 5 000.
   */
  requestTimeoutMs: number;
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

/** Descriptors kept back from sockets, at least: Redis connections, logs, the host's own. */
const RESERVED_DESCRIPTORS = 64;

/** The soft limit on open files less a reserve (10 %, at least 64), or 10,000. */
export function descriptorBudget(limits?: string): number {
  const soft = openFilesLimit(limits);
  if (soft === undefined) return 10_000;
  return Math.max(1, soft - Math.max(RESERVED_DESCRIPTORS, Math.ceil(soft * 0.1)));
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxFrameBytes: 4_096,
  maxTokenBytes: 8_192,
  maxFollowFrameBytes: 65_536,
  maxRoomsPerSocket: 50,
  rateBurst: 20,
  ratePerSecond: 5,
  maxBufferedBytes: 1_048_576,
  maxSockets: descriptorBudget(),
  maxSocketsPerUser: 64,
  maxSocketsPerAddress: 0,
  ipv6PrefixBits: 64,
  requestTimeoutMs: 5_000,
});

export function checkLimits(limits: Partial<Limits> | undefined): Limits {
  const l = { ...DEFAULT_LIMITS, ...knownKeys(limits, Object.keys(DEFAULT_LIMITS)) };
  return {
    maxFrameBytes: integer("maxFrameBytes", l.maxFrameBytes, 64, 16_777_216),
    maxTokenBytes: integer("maxTokenBytes", l.maxTokenBytes, 64, 1_048_576),
    maxFollowFrameBytes: integer("maxFollowFrameBytes", l.maxFollowFrameBytes, 64, 16_777_216),
    maxRoomsPerSocket: integer("maxRoomsPerSocket", l.maxRoomsPerSocket, 1, 100_000),
    rateBurst: integer("rateBurst", l.rateBurst, 1, 1_000_000),
    ratePerSecond: integer("ratePerSecond", l.ratePerSecond, 1, 1_000_000),
    maxBufferedBytes: integer("maxBufferedBytes", l.maxBufferedBytes, 1_024, 1_073_741_824),
    maxSockets: integer("maxSockets", l.maxSockets, 1, 10_000_000),
    maxSocketsPerUser: integer("maxSocketsPerUser", l.maxSocketsPerUser, 1, 10_000_000),
    maxSocketsPerAddress: integer("maxSocketsPerAddress", l.maxSocketsPerAddress, 0, 10_000_000),
    ipv6PrefixBits: integer("ipv6PrefixBits", l.ipv6PrefixBits, 1, 128),
    requestTimeoutMs: integer("requestTimeoutMs", l.requestTimeoutMs, 100, 600_000),
  };
}

/** What a frame holds beside its state or its token, at most: its type, a room id and a ref
 * (each character escaped), the event types. */
const ENVELOPE_BYTES = 4_096;

/** The most bytes JSON text can take for one byte of UTF-8: an ASCII character as `\u0041`. */
const ESCAPED_BYTES = 6;

/**
 * The longest frames a gateway reads: `frame` for any frame, `refresh` for a refresh frame (its
 * token may be longer), `follow` for a follow-users frame (its ids may be). No frame longer than a state within `maxStateBytes` can be, even with
 * every byte escaped (6 bytes each), is valid, whatever `maxFrameBytes` allows: it is closed
 * with 1009 before it is parsed. A refresh frame may carry any token of `maxTokenBytes`, escaped
 * as its client likes (6 bytes a byte, at most).
 */
export function frameSizes(limits: Limits, maxStateBytes: number): FrameSizes {
  const frame = Math.min(limits.maxFrameBytes, ESCAPED_BYTES * maxStateBytes + ENVELOPE_BYTES);
  return {
    frame,
    refresh: Math.max(frame, ESCAPED_BYTES * limits.maxTokenBytes + ENVELOPE_BYTES),
    follow: Math.max(frame, limits.maxFollowFrameBytes),
  };
}

/** Whether a token is longer than `maxTokenBytes`, in UTF-8 bytes (the upgrade's and a refresh's
 * measure alike: the same token counts the same at both). */
export function tokenTooLong(token: string, { maxTokenBytes }: Pick<Limits, "maxTokenBytes">) {
  // No string is shorter in UTF-8 bytes than in UTF-16 units: a long one is not even encoded.
  return token.length > maxTokenBytes || Buffer.byteLength(token, "utf8") > maxTokenBytes;
}

export interface FrameSizes {
  readonly frame: number;
  readonly refresh: number;
  readonly follow: number;
}
