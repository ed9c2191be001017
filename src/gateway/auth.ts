import type { IncomingMessage } from "node:http";
import { createLocalJWKSet, errors, jwtVerify, type JSONWebKeySet, type JWTPayload } from "jose";

/** Who a socket belongs to, as the server established it: frames never name a user. */
export interface Identity {
  user: string;
  /**
   * Rooms the identity may join: ids, or prefixes ending in `*` (`"team-7:*"`); null when a
   * token says nothing about rooms and the `authorize` hook decides alone.
   */
  rooms: readonly string[] | null;
  /** The verified token's claims, for an `authorize` hook. */
  claims?: JWTPayload;
}

/** Establishes the identity of an upgrade request, or refuses it (null or an AuthError). */
export type Authenticate = (request: IncomingMessage) => Promise<Identity | null> | Identity | null;

export interface JwtOptions {
  /** HS256 secret. */
  secret?: string | Uint8Array;
  /** A JSON Web Key Set held locally (public keys: RS256, ES256, EdDSA, …). */
  jwks?: JSONWebKeySet;
  issuer?: string;
  audience?: string;
  /** Accepted algorithms; default HS256 with a secret, the JWKS keys' own otherwise. */
  algorithms?: string[];
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

/** The bearer token of an upgrade: the Authorization header, or `?token=` (browsers). */
export function bearerToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (header?.startsWith("Bearer ")) return header.slice(7).trim() || undefined;
  const query = new URL(request.url ?? "/", "http://localhost").searchParams.get("token");
  return query || undefined;
}

/**
 * Authentication by JWT: the user is the `sub` claim, the rooms the optional `rooms` claim.
 * jose verifies the signature and `exp`/`nbf`; an unsigned token (`alg: none`) never verifies.
 */
export function jwtAuthenticator(options: JwtOptions): Authenticate {
  const { secret, jwks, issuer, audience } = options;
  if ((secret === undefined) === (jwks === undefined)) {
    throw new TypeError("jwt needs exactly one of secret and jwks");
  }
  const key =
    secret !== undefined
      ? typeof secret === "string"
        ? new TextEncoder().encode(secret)
        : secret
      : createLocalJWKSet(jwks!);
  const algorithms = options.algorithms ?? (secret !== undefined ? ["HS256"] : undefined);
  return async (request) => {
    const token = bearerToken(request);
    if (!token) throw new AuthError(401, "no-token", "no token");
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key as Parameters<typeof jwtVerify>[1], {
        issuer,
        audience,
        algorithms,
      }));
    } catch (error) {
      if (error instanceof errors.JWTExpired) {
        throw new AuthError(401, "expired-token", "the token has expired");
      }
      throw new AuthError(
        401,
        "invalid-token",
        `the token is invalid (${(error as Error).message})`,
      );
    }
    if (typeof payload.sub !== "string" || payload.sub === "") {
      throw new AuthError(401, "invalid-token", "the token names no user (sub)");
    }
    const rooms = payload.rooms;
    if (
      rooms !== undefined &&
      !(Array.isArray(rooms) && rooms.every((r) => typeof r === "string"))
    ) {
      throw new AuthError(401, "invalid-token", "the token's rooms claim is not a list of rooms");
    }
    return { user: payload.sub, rooms: rooms ?? null, claims: payload };
  };
}

/** Whether an identity's room list lets it into a room: an id, or a prefix ending in `*`. */
export function roomAllowed(rooms: readonly string[], room: string): boolean {
  return rooms.some((r) => (r.endsWith("*") ? room.startsWith(r.slice(0, -1)) : r === room));
}
