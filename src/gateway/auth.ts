import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import type { Identity } from "../runtime/identity.js";

export { bearerToken, targetOf } from "../runtime/bearer.js";

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
