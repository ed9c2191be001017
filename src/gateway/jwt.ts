import { webcrypto } from "node:crypto";
import type { JSONWebKeySet, JWTPayload } from "jose";
import { describe, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { AuthError, type Identity } from "../runtime/identity.js";
import { importPeer } from "../runtime/peer.js";
import type { JwtOptions } from "./auth.js";

/** Verifies a token and returns its identity, or throws an AuthError. */
export type Verify = (token: string) => Promise<Identity>;

/** JwtOptions checked, with defaults: every mistake is a typed INVALID_OPTION error. */
export function checkJwtOptions(options: unknown): CheckedJwtOptions {
  const o = knownKeys(options as JwtOptions, [
    "secret",
    "jwks",
    "issuer",
    "audience",
    "algorithms",
    "clockToleranceMs",
    "allowNoExpiry",
  ]);
  const { secret, jwks } = o;
  if ((secret === undefined) === (jwks === undefined)) {
    invalidOption("jwt needs exactly one of secret and jwks");
  }
  if (secret !== undefined && typeof secret !== "string" && !(secret instanceof Uint8Array)) {
    invalidOption(`jwt.secret must be a string or a Uint8Array, got ${describe(secret)}`);
  }
  if (jwks !== undefined && !Array.isArray((jwks as Partial<JsonWebKeySetLike> | null)?.keys)) {
    invalidOption("jwt.jwks must be a JSON Web Key Set: { keys: [...] }");
  }
  for (const name of ["issuer", "audience"] as const) {
    if (o[name] !== undefined && typeof o[name] !== "string") {
      invalidOption(`jwt.${name} must be a string, got ${describe(o[name])}`);
    }
  }
  const algorithms: unknown = o.algorithms;
  if (
    algorithms !== undefined &&
    !(Array.isArray(algorithms) && algorithms.every((a) => typeof a === "string"))
  ) {
    invalidOption("jwt.algorithms must be a list of algorithm names");
  }
  if (o.allowNoExpiry !== undefined && typeof o.allowNoExpiry !== "boolean") {
    invalidOption(`jwt.allowNoExpiry must be a boolean, got ${describe(o.allowNoExpiry)}`);
  }
  if (secret !== undefined) checkSecretLength(secret, algorithms ?? []);
  return {
    ...o,
    clockToleranceMs: integer("jwt.clockToleranceMs", o.clockToleranceMs ?? 0, 0, 86_400_000),
    allowNoExpiry: o.allowNoExpiry ?? false,
  };
}

/**
 * An HMAC key at least as long as the hash it feeds (RFC 7518 §3.2): 32 bytes for HS256 (the
 * default), 48 for HS384, 64 for HS512, the longest of the algorithms allowed.
 */
function checkSecretLength(secret: string | Uint8Array, algorithms: readonly string[]): void {
  const bytes =
    typeof secret === "string" ? new TextEncoder().encode(secret).length : secret.length;
  const hmacs = algorithms.length === 0 ? ["HS256"] : algorithms.filter((a) => /^HS\d+$/.test(a));
  for (const alg of hmacs) {
    const needed = Number(alg.slice(2)) / 8;
    if (bytes < needed) {
      invalidOption(
        `jwt.secret must be at least ${needed} bytes for ${alg} (RFC 7518 §3.2), got ${bytes}`,
      );
    }
  }
}

export type CheckedJwtOptions = JwtOptions &
  Required<Pick<JwtOptions, "clockToleranceMs" | "allowNoExpiry">>;

interface JsonWebKeySetLike {
  keys: unknown[];
}

/**
 * JWT verification with jose, imported only here and only when a gateway is given `jwt`: the
 * user is the `sub` claim, the rooms the optional `rooms` claim, the expiry `exp`; an
 * `invisible: true` claim makes the socket's memberships invisible. jose checks
 * the signature and `exp`/`nbf`; an unsigned token (`alg: none`) never verifies.
 */
export async function jwtVerifier(options: CheckedJwtOptions): Promise<Verify> {
  const { createLocalJWKSet, errors, jwtVerify } = await importPeer(
    () => import("jose"),
    "jose",
    "rollcall/gateway's jwt option",
  );
  const { secret, jwks, issuer, audience, clockToleranceMs, allowNoExpiry } = options;
  const key =
    secret !== undefined
      ? hmacKeys(typeof secret === "string" ? new TextEncoder().encode(secret) : secret)
      : createLocalJWKSet(jwks as unknown as JSONWebKeySet);
  const algorithms = options.algorithms ?? (secret !== undefined ? ["HS256"] : undefined);
  const invalid = (why: string) => new AuthError(401, "invalid-token", `the token ${why}`);
  return async (token) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key as Parameters<typeof jwtVerify>[1], {
        issuer,
        audience,
        algorithms,
        clockTolerance: clockToleranceMs / 1000,
      }));
    } catch (error) {
      if (error instanceof errors.JWTExpired) {
        throw new AuthError(401, "expired-token", "the token has expired");
      }
      throw invalid(`is invalid (${(error as Error).message})`);
    }
    if (typeof payload.sub !== "string" || payload.sub === "") throw invalid("names no user (sub)");
    if (payload.exp === undefined && !allowNoExpiry) throw invalid("has no expiry (exp)");
    const rooms = payload.rooms;
    if (
      rooms !== undefined &&
      !(Array.isArray(rooms) && rooms.every((r) => typeof r === "string"))
    ) {
      throw invalid("has a rooms claim that is not a list of rooms");
    }
    const invisible = payload.invisible;
    if (invisible !== undefined && typeof invisible !== "boolean") {
      throw invalid("has an invisible claim that is not a boolean");
    }
    const expiresAt = payload.exp === undefined ? null : payload.exp * 1000;
    return {
      user: payload.sub,
      rooms: rooms ?? null,
      ...(invisible === true ? { invisible } : {}),
      claims: payload,
      expiresAt,
    };
  };
}

/**
 * The secret as a key for each HMAC algorithm a token names (jose has checked the name against
 * the allowed ones first), imported once: jose given the bytes imports them at every verify,
 * which doubled its cost (41 against 87 µs a token, measured). Any other algorithm gets the
 * bytes, which jose refuses for it as before.
 */
function hmacKeys(
  secret: Uint8Array,
): (header: { alg?: string }) => Promise<webcrypto.CryptoKey | Uint8Array> {
  const imported = new Map<string, Promise<webcrypto.CryptoKey>>();
  return (header) => {
    const bits = /^HS(256|384|512)$/.exec(header.alg ?? "")?.[1];
    if (bits === undefined) return Promise.resolve(secret);
    let key = imported.get(bits);
    if (!key) {
      const algorithm = { name: "HMAC", hash: `SHA-${bits}` };
      key = webcrypto.subtle.importKey("raw", secret, algorithm, false, ["verify"]);
      imported.set(bits, key);
    }
    return key;
  };
}
