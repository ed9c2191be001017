import type { IncomingMessage } from "node:http";
import { BEARER_PROTOCOL } from "../protocol/frames.js";
import type { AuthError } from "./identity.js";

// The bearer token of an HTTP request and the challenge of its 401: the gateway's and
// rollcall/fastify's alike.

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

/**
 * The challenge of a 401 (RFC 6750 §3): an error code only when a token came and failed (the hook
 * refusing a request that carried one included); a request without credentials gets the bare
 * scheme.
 */
export function challenge(reason: AuthError["reason"], request: IncomingMessage): string {
  const token = bearerToken(request) !== undefined;
  if (reason === "no-token" || (reason === "refused" && !token)) return `Bearer realm="rollcall"`;
  const description =
    reason === "expired-token"
      ? "the token has expired"
      : reason === "refused"
        ? "the token was refused"
        : "the token is invalid";
  return `Bearer realm="rollcall", error="invalid_token", error_description="${description}"`;
}
