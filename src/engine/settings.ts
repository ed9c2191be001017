import type { MeterLike } from "./metrics.js";
import { describe, integer, invalidOption, knownKeys } from "../protocol/options.js";

export interface RollcallOptions {
  /** Namespace of every key and channel: 1 to 64 letters, digits and `_ . : -`. Default `rollcall`. */
  prefix?: string;
  /** Rooms are spread over this many hash slots; fixed per deployment. Default 16. */
  buckets?: number;
  /** A connection silent for this long is gone. Default 45 000: three missed 15 s heartbeats. */
  presenceWindowMs?: number;
  /** A typing mark without a refresh for this long stops. Default 5 000. */
  typingWindowMs?: number;
  /** Expiry of a room's keys, refreshed by heartbeats: the safety net if no sweeper runs. Default 1 day. */
  keyTtlMs?: number;
  /** Users listed in each join and leave event (the count is always exact). Default 20. */
  eventRosterLimit?: number;
  /** Most members one roster() call returns. Default 1 000. */
  rosterLimit?: number;
  /** Largest member state, in bytes of canonical JSON. Default 1 024. */
  maxStateBytes?: number;
  /** How long the reply of a call that changed something is kept for a resend of it. Default 30 000. */
  replayWindowMs?: number;
  /**
   * How long a user whose last connection left, or expired, stays announced as present before
   * the `leave` is published: a connection back in time (a page reload) publishes nothing at all.
   * Default 5 000: a reload or a network switch, with a reconnect's first retries.
   */
  leaveGraceMs?: number;
  /**
   * Keep every user's status across rooms (Rollcall.status, Subscriber.watchUsers, the gateway's
   * follow-users): a visible join or leave then also writes a user change, applied to the
   * user's status after the call, and each user seen keeps two keys (see docs/design.md).
   * Default false: a deployment that does not use it pays nothing for it. Every instance of the
   * deployment must agree.
   */
  userStatus?: boolean;
  /**
   * How long a user's last-seen time is kept once they went offline (see Rollcall.status).
   * Default 30 days.
   */
  userRetentionMs?: number;
  /** Events kept in each bucket's log (a Redis stream, trimmed to about this many); 0: no log. Default 0. */
  logLength?: number;
  /** An OpenTelemetry Meter: rollcall records its metrics through it (none without one). */
  meter?: MeterLike;
}

export type Settings = Readonly<Required<Omit<RollcallOptions, "meter">>>;

export const DEFAULTS: Settings = {
  prefix: "rollcall",
  buckets: 16,
  presenceWindowMs: 45_000,
  typingWindowMs: 5_000,
  keyTtlMs: 86_400_000,
  eventRosterLimit: 20,
  rosterLimit: 1_000,
  maxStateBytes: 1_024,
  replayWindowMs: 30_000,
  leaveGraceMs: 5_000,
  logLength: 0,
  userStatus: false,
  userRetentionMs: 30 * 86_400_000,
};

/** Bumped whenever what rollcall stores in Redis changes shape. */
export const LAYOUT_VERSION = 3;

/** What every instance of a deployment must agree on: it decides who has expired, and where. */
const SHARED = [
  "buckets",
  "presenceWindowMs",
  "typingWindowMs",
  "keyTtlMs",
  "leaveGraceMs",
  "logLength",
] as const;

const PREFIX = /^[A-Za-z0-9_.:-]{1,64}$/;
const DAY = 86_400_000;

/** Fills in defaults and checks every option, and how they relate, before anything runs. */
export function resolveSettings(options?: RollcallOptions): Settings {
  const o = { ...DEFAULTS, ...knownKeys(options, [...Object.keys(DEFAULTS), "meter"]) };
  if (typeof o.prefix !== "string" || !PREFIX.test(o.prefix)) {
    invalidOption(`prefix must match ${String(PREFIX)}, got ${describe(o.prefix)}`);
  }
  const meter = options?.meter as Partial<MeterLike> | null | undefined;
  if (meter !== undefined && typeof meter?.createCounter !== "function") {
    invalidOption(`meter must be an OpenTelemetry Meter, got ${describe(meter)}`);
  }
  const settings: Settings = {
    prefix: o.prefix,
    buckets: integer("buckets", o.buckets, 1, 16_384),
    presenceWindowMs: integer("presenceWindowMs", o.presenceWindowMs, 1_000, DAY),
    typingWindowMs: integer("typingWindowMs", o.typingWindowMs, 100, DAY),
    keyTtlMs: integer("keyTtlMs", o.keyTtlMs, 1_000, 30 * DAY),
    eventRosterLimit: integer("eventRosterLimit", o.eventRosterLimit, 0, 1_000),
    rosterLimit: integer("rosterLimit", o.rosterLimit, 1, 100_000),
    maxStateBytes: integer("maxStateBytes", o.maxStateBytes, 2, 65_536),
    replayWindowMs: integer("replayWindowMs", o.replayWindowMs, 1_000, DAY),
    leaveGraceMs: integer("leaveGraceMs", o.leaveGraceMs, 0, 3_600_000),
    logLength: integer("logLength", o.logLength, 0, 100_000_000),
    userStatus: o.userStatus,
    userRetentionMs: integer("userRetentionMs", o.userRetentionMs, 1_000, 366 * DAY),
  };
  if (typeof settings.userStatus !== "boolean") {
    invalidOption(`userStatus must be a boolean, got ${describe(settings.userStatus)}`);
  }
  if (settings.typingWindowMs >= settings.presenceWindowMs) {
    invalidOption("typingWindowMs must be shorter than presenceWindowMs");
  }
  if (settings.keyTtlMs < 3 * settings.presenceWindowMs) {
    invalidOption("keyTtlMs must be at least three presence windows, or live members could vanish");
  }
  return settings;
}

/** The fields the deployment stores in Redis, as the deployment script takes them. */
export function deploymentFields(settings: Settings): string[] {
  const fields = ["layout", String(LAYOUT_VERSION)];
  for (const name of SHARED) fields.push(name, String(settings[name]));
  // Stored only when on: a deployment made before the option existed has it off, as agreed.
  if (settings.userStatus) fields.push("userStatus", "true");
  return fields;
}

/** How stored fields differ from this instance's, in words; empty when they agree. */
export function differences(stored: readonly string[], ours: readonly string[]): string[] {
  const theirs = new Map<string, string>();
  for (let i = 0; i + 1 < stored.length; i += 2) theirs.set(stored[i]!, stored[i + 1]!);
  const found: string[] = [];
  for (let i = 0; i + 1 < ours.length; i += 2) {
    const [name, value] = [ours[i]!, ours[i + 1]!];
    const stored = theirs.get(name);
    theirs.delete(name);
    if (stored !== value) found.push(`${name} is ${stored ?? "missing"} there, ${value} here`);
  }
  // A field stored there that this instance does not write (userStatus, on there, off here).
  for (const [name, stored] of theirs) found.push(`${name} is ${stored} there, missing here`);
  return found;
}

/**
 * The settings as every bucket script takes them (ARGV[1], see lua/include/bucket.lua): each in
 * 12 hex digits, those every call needs first, then what only a change needs.
 */
export function packSettings(s: Settings): string {
  return [
    s.presenceWindowMs,
    s.typingWindowMs,
    s.keyTtlMs,
    s.eventRosterLimit,
    s.logLength,
    s.leaveGraceMs,
    s.replayWindowMs,
    s.userStatus ? 1 : 0,
  ]
    .map((value) => value.toString(16).padStart(12, "0"))
    .join("");
}
