import { InvalidInputError } from "./errors.js";

export interface RollcallOptions {
  /** Namespace of every key and channel: 1 to 64 letters, digits and `_ . : -`. Default `rollcall`. */
  prefix?: string;
  /** Rooms are spread over this many hash slots; fixed per deployment. Default 16. */
  buckets?: number;
  /** A connection without a heartbeat for this long is gone. Default 45 000 (the seed's 45 s). */
  presenceWindowMs?: number;
  /** A typing mark without a refresh for this long stops. Default 5 000. */
  typingWindowMs?: number;
  /** Expiry of the bucket keys, refreshed by heartbeats: the safety net if no sweeper runs. Default 1 day. */
  keyTtlMs?: number;
  /** Users listed in each join and leave event (the count is always exact). Default 20. */
  eventRosterLimit?: number;
  /** Most members one roster() call returns. Default 1 000. */
  rosterLimit?: number;
  /** Largest member state, in bytes of canonical JSON. Default 1 024. */
  maxStateBytes?: number;
}

export type Settings = Readonly<Required<RollcallOptions>>;

export const DEFAULTS: Settings = {
  prefix: "rollcall",
  buckets: 16,
  presenceWindowMs: 45_000,
  typingWindowMs: 5_000,
  keyTtlMs: 86_400_000,
  eventRosterLimit: 20,
  rosterLimit: 1_000,
  maxStateBytes: 1_024,
};

const PREFIX = /^[A-Za-z0-9_.:-]{1,64}$/;

function invalid(message: string): never {
  throw new InvalidInputError("INVALID_OPTION", message);
}

/** An integer option within bounds, or a typed INVALID_OPTION error. */
export function integer(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    invalid(`${name} must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/** Refuses anything but an object of the given option names (a typo must not pass silently). */
export function knownKeys(options: unknown, names: readonly string[]): void {
  if (typeof options !== "object" || options === null) invalid("options must be an object");
  for (const key of Object.keys(options)) {
    if (!names.includes(key)) invalid(`unknown option ${key}`);
  }
}

/** Fills in defaults and checks every option, and how they relate, before anything runs. */
export function settle(options: RollcallOptions = {}): Settings {
  knownKeys(options, Object.keys(DEFAULTS));
  const o = { ...DEFAULTS, ...options };
  if (typeof o.prefix !== "string" || !PREFIX.test(o.prefix)) {
    invalid(`prefix must match ${String(PREFIX)}, got ${JSON.stringify(o.prefix)}`);
  }
  const day = 86_400_000;
  const settings: Settings = {
    prefix: o.prefix,
    buckets: integer("buckets", o.buckets, 1, 16_384),
    presenceWindowMs: integer("presenceWindowMs", o.presenceWindowMs, 1_000, day),
    typingWindowMs: integer("typingWindowMs", o.typingWindowMs, 100, day),
    keyTtlMs: integer("keyTtlMs", o.keyTtlMs, 1_000, 30 * day),
    eventRosterLimit: integer("eventRosterLimit", o.eventRosterLimit, 0, 1_000),
    rosterLimit: integer("rosterLimit", o.rosterLimit, 1, 100_000),
    maxStateBytes: integer("maxStateBytes", o.maxStateBytes, 2, 65_536),
  };
  if (settings.typingWindowMs >= settings.presenceWindowMs) {
    invalid("typingWindowMs must be shorter than presenceWindowMs");
  }
  if (settings.keyTtlMs < 3 * settings.presenceWindowMs) {
    invalid("keyTtlMs must be at least three presence windows, or live members could vanish");
  }
  return settings;
}
