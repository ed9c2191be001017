import { checkId, type IdPolicy } from "../protocol/ids.js";
import { describe } from "../protocol/options.js";
import type { Expect } from "./hooks.js";

/** A verified token's claims (standard ones typed, the rest as they came). */
export interface Claims {
  readonly sub?: string;
  readonly iss?: string;
  readonly aud?: string | readonly string[];
  /** Expiry and not-before, in seconds since the epoch. */
  readonly exp?: number;
  readonly nbf?: number;
  readonly iat?: number;
  readonly [claim: string]: unknown;
}

/** Who a socket belongs to, as the server established it: frames never name a user. */
export interface Identity {
  user: string;
  /**
   * Rooms the identity may join: ids, or prefixes ending in `*` (`"team-7:*"`); null when a
   * token says nothing about rooms and the `authorize` hook decides alone.
   */
  rooms: readonly string[] | null;
  /**
   * Every room the socket joins, it is in unseen (as a join frame's `invisible`): in no roster,
   * count, event or status; its typing and state are refused. A JWT's `invisible: true` claim.
   */
  invisible?: boolean;
  /** The verified token's claims, for an `authorize` hook. */
  claims?: Claims;
  /**
   * When the identity stops being valid, ms since the epoch: the socket is closed with 4001 then,
   * unless a refresh came first. Undefined or null: never (a JWT's is its `exp`).
   */
  expiresAt?: number | null;
}

/** A refused identity: the HTTP status an upgrade is answered with, and why. */
export class AuthError extends Error {
  constructor(
    readonly status: 401 | 403,
    readonly reason: "no-token" | "invalid-token" | "expired-token" | "refused",
    message: string,
  ) {
    super(message);
    this.name = "AuthError";
  }
}

/** Whether an identity's room list lets it into a room: an id, or a prefix ending in `*`. */
export function roomAllowed(rooms: readonly string[], room: string): boolean {
  return rooms.some((r) => (r.endsWith("*") ? room.startsWith(r.slice(0, -1)) : r === room));
}

/** An object with a user, or null: checkIdentity looks closer. */
export const isIdentityOrNull: Expect<Identity | null> = (value): value is Identity | null =>
  value === null || (typeof value === "object" && !Array.isArray(value));

/** What a hook returned, checked: a bad identity is the hook's bug, refused and reported. */
export function checkIdentity(identity: Identity, ids: IdPolicy): Identity {
  checkId("user", identity.user, ids);
  const { rooms, expiresAt, invisible } = identity;
  if (rooms !== null && !(Array.isArray(rooms) && rooms.every((r) => typeof r === "string"))) {
    throw new TypeError(
      `an identity's rooms must be null or a list of rooms, got ${describe(rooms)}`,
    );
  }
  if (invisible !== undefined && typeof invisible !== "boolean") {
    throw new TypeError(`an identity's invisible must be a boolean, got ${describe(invisible)}`);
  }
  if (expiresAt !== undefined && expiresAt !== null && !Number.isFinite(expiresAt)) {
    throw new TypeError(
      `an identity's expiresAt must be ms since the epoch, got ${describe(expiresAt)}`,
    );
  }
  if (typeof expiresAt === "number" && expiresAt <= Date.now()) {
    throw new AuthError(401, "expired-token", "the identity has expired");
  }
  return identity;
}
