import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import { BEARER_PROTOCOL } from "../protocol/frames.js";

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
  /** The verified token's claims, for an `authorize` hook. */
  claims?: Claims;
  /**
   * When the identity stops being valid, ms since the epoch: the socket is closed with 4001 then,
   * unless a refresh came first. Undefined or null: never (a JWT's is its `exp`).
   */
  expiresAt?: number | null;
}

/**
 * Establishes the identity of an upgrade request, or refuses it (null or an AuthError). A refresh
 * frame calls it again with a stand-in request that carries only the new token, as
 * `Authorization: Bearer <token>`, and the gateway's path: `refreshOf(request)` tells it apart and
 * gives the identity being refreshed. (The upgrade request itself is never kept.)
 */
export type Authenticate = (request: IncomingMessage) => Promise<Identity | null> | Identity | null;

/** A JSON Web Key Set as JSON: `{ keys: [ { kty, crv, x, y, kid, alg, … } ] }`. */
export interface JsonWebKeySet {
  keys: readonly Record<string, unknown>[];
}

export interface JwtOptions {
  /** HS256 secret. */
  secret?: string | Uint8Array;
  /** A JSON Web Key Set held locally (public keys: RS256, ES256, EdDSA, …). */
  jwks?: JsonWebKeySet;
  issuer?: string;
  audience?: string;
  /** Accepted algorithms; default HS256 with a secret, the JWKS keys' own otherwise. */
  algorithms?: string[];
  /** Leeway on `exp` and `nbf`, at the upgrade and for the socket's expiry. Default 0. */
  clockToleranceMs?: number;
  /** Accept tokens without `exp` (such a socket never expires). Default false: refused. */
  allowNoExpiry?: boolean;
}

/** A refused upgrade: answered with this HTTP status before any socket opens. */
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

const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * The bearer token of an upgrade, from the first of: the Authorization header (`Bearer`, in any
 * case), a `rollcall.bearer.<token>` subprotocol entry (browsers), `?token=` (older clients).
 */
export function bearerToken(request: IncomingMessage): string | undefined {
  const header = BEARER.exec(request.headers.authorization ?? "")?.[1];
  if (header !== undefined) return header;
  const offered = request.headers["sec-websocket-protocol"];
  if (offered !== undefined) {
    for (const entry of offered.split(",")) {
      const protocol = entry.trim();
      if (protocol.startsWith(BEARER_PROTOCOL) && protocol.length > BEARER_PROTOCOL.length) {
        return protocol.slice(BEARER_PROTOCOL.length);
      }
    }
  }
  return targetOf(request)?.searchParams.get("token") || undefined;
}

/** The request's target as a URL, or undefined for one the URL parser refuses (`//x:99999/`). */
export function targetOf(request: IncomingMessage): URL | undefined {
  try {
    return new URL(request.url ?? "/", "http://localhost");
  } catch {
    return undefined;
  }
}

const refreshes = new WeakMap<IncomingMessage, Identity>();

/** The stand-in request `authenticate` gets for a refresh frame. */
export function refreshRequest(token: string, identity: Identity, path: string): IncomingMessage {
  const request = new IncomingMessage(new Socket());
  request.method = "GET";
  request.url = path;
  request.headers = { authorization: `Bearer ${token}` };
  refreshes.set(request, identity);
  return request;
}

/** For an `authenticate` hook: the identity a refresh would replace, or undefined at an upgrade. */
export function refreshOf(request: IncomingMessage): Identity | undefined {
  return refreshes.get(request);
}

/** Whether an identity's room list lets it into a room: an id, or a prefix ending in `*`. */
export function roomAllowed(rooms: readonly string[], room: string): boolean {
  return rooms.some((r) => (r.endsWith("*") ? room.startsWith(r.slice(0, -1)) : r === room));
}
