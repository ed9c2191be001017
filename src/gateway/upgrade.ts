import { STATUS_CODES, type IncomingMessage } from "node:http";
import { isIP } from "node:net";
import type { Duplex } from "node:stream";
import type { Metrics } from "../engine/metrics.js";
import type { IdPolicy } from "../protocol/ids.js";
import { SUBPROTOCOLS } from "../protocol/frames.js";
import { describe, invalidOption } from "../protocol/options.js";
import { callHook, callNow, HookError, isBoolean } from "../runtime/hooks.js";
import { Budgets, Tally, type RateLimit } from "../runtime/rateLimit.js";
import { AuthError, checkIdentity, isIdentityOrNull, type Identity } from "../runtime/identity.js";
import { bearerToken } from "./auth.js";
import { challenge } from "../runtime/bearer.js";
import { tokenTooLong, type Limits } from "../runtime/limits.js";

/** Which cross-site pages may open a socket: a list of origins, or a function deciding. */
export type Origins = readonly string[] | ((origin: string, request: IncomingMessage) => boolean);

/** Why an upgrade was refused: the `reason` of the refusal metric and of the response's body. */
export type RefusalReason =
  | AuthError["reason"]
  | "not-found"
  | "bad-request"
  | "unsupported-protocol"
  | "origin"
  | "too-many-sockets"
  | "too-many-user-sockets"
  | "too-many-address-sockets"
  | "auth-timeout"
  | "closing";

/** An upgrade let in: who, their frame budget, and what it counts against. */
export interface Admitted {
  readonly identity: Identity;
  readonly rate: RateLimit;
  readonly address: string | undefined;
}

/** What the admission needs of its gateway. */
export interface AdmissionHost {
  readonly metrics: Metrics;
  /** Sockets open now. */
  sockets(): number;
  closed(): boolean;
  /** The identity an upgrade request establishes (or a promise of it): checked here. */
  authenticate(request: IncomingMessage): unknown;
  report(error: unknown): void;
}

export interface AdmissionOptions {
  limits: Limits;
  ids: IdPolicy;
  origins: Origins | undefined;
  trustedProxies: readonly string[];
  authTimeoutMs: number;
}

/** Seconds a client is told to wait: a full process frees sockets slower than a user does. */
const RETRY_AFTER = { busy: 5, user: 10 } as const;

/**
 * The door of the gateway: everything decided about an upgrade before a WebSocket exists. It
 * refuses (with an HTTP status, and the socket destroyed) what it does not serve, in the order
 * of what is cheapest to check: the request's shape, the process's socket limit, the protocol
 * version, the origin, the address's cap, the identity (under a deadline), the user's cap.
 */
export class Admission {
  private inFlight = 0;
  private readonly addresses: Tally<string> | undefined;
  private readonly budgets: Budgets;
  private readonly origin: (origin: string, request: IncomingMessage) => boolean;
  private readonly proxies: ReadonlySet<string>;

  constructor(
    private readonly host: AdmissionHost,
    private readonly options: AdmissionOptions,
  ) {
    const { limits } = options;
    this.budgets = new Budgets(limits);
    if (limits.maxSocketsPerAddress > 0) this.addresses = new Tally(limits.maxSocketsPerAddress);
    this.origin = checkOrigins(options.origins);
    this.proxies = checkProxies(options.trustedProxies);
  }

  /** Handshakes under way: counted with the open sockets against `maxSockets`. */
  get handshakes(): number {
    return this.inFlight;
  }

  /**
   * Lets an upgrade in, or answers it and destroys the socket. What it lets in must be settled
   * with `opened` (or `release` when the WebSocket never opened) right after. Never throws.
   */
  async admit(request: IncomingMessage, socket: Duplex): Promise<Admitted | undefined> {
    socket.on("error", ignore); // a client gone mid-handshake is no error of ours
    const { limits } = this.options;
    const refuse = (reason: RefusalReason, status: number, message: string, headers = {}) => {
      this.host.metrics.add("rollcall.gateway.refusals", 1, { reason });
      answer(socket, status, `${reason}: ${message}`, headers);
      return undefined;
    };
    if (!isWebSocketUpgrade(request)) {
      return refuse("bad-request", 400, "not a WebSocket upgrade");
    }
    if (this.host.sockets() + this.inFlight >= limits.maxSockets) {
      return refuse("too-many-sockets", 503, "the server holds all the sockets it can", {
        "Retry-After": RETRY_AFTER.busy,
      });
    }
    if (!offered(request).some((p) => SUBPROTOCOLS.includes(p))) {
      return refuse(
        "unsupported-protocol",
        426,
        `offer a subprotocol among the versions served: ${SUBPROTOCOLS.join(", ")}`,
        { "Sec-WebSocket-Protocol": SUBPROTOCOLS.join(", ") },
      );
    }
    const origin = request.headers.origin;
    if (origin !== undefined && !sameOrigin(origin, request.headers.host)) {
      if (!this.allows(origin, request)) return refuse("origin", 403, "origin not allowed");
    }
    const token = bearerToken(request);
    if (token !== undefined && tokenTooLong(token, limits)) {
      return refuse(
        "invalid-token",
        401,
        `the token is longer than ${limits.maxTokenBytes} bytes`,
        {
          "WWW-Authenticate": challenge("invalid-token", request),
        },
      );
    }
    const address = this.addresses ? clientAddress(request, this.proxies, limits) : undefined;
    if (address !== undefined && !this.addresses!.add(address)) {
      return refuse("too-many-address-sockets", 429, "too many sockets from this address", {
        "Retry-After": RETRY_AFTER.user,
      });
    }
    this.inFlight += 1;
    let identity: Identity;
    try {
      identity = await this.identify(request);
    } catch (error) {
      this.settle(address);
      if (error instanceof HookError && error.failure === "timeout") {
        this.host.report(error);
        return refuse("auth-timeout", 503, "authentication took too long", {
          "Retry-After": RETRY_AFTER.busy,
        });
      }
      if (!(error instanceof AuthError)) this.host.report(error);
      const refusal =
        error instanceof AuthError ? error : new AuthError(401, "refused", "authentication failed");
      const headers =
        refusal.status === 401 ? { "WWW-Authenticate": challenge(refusal.reason, request) } : {};
      return refuse(refusal.reason, refusal.status, refusal.message, headers);
    }
    const rate = this.budgets.take(identity.user);
    if (!rate) {
      this.settle(address);
      return refuse("too-many-user-sockets", 429, "too many sockets for this user", {
        "Retry-After": RETRY_AFTER.user,
      });
    }
    const admitted = { identity, rate, address };
    if (this.host.closed()) {
      this.release(identity.user, address);
      this.inFlight -= 1;
      return refuse("closing", 503, "the server is closing", { "Retry-After": RETRY_AFTER.busy });
    }
    return admitted;
  }

  /** The handshake of an admitted upgrade is over: its socket is open (or never will be). */
  opened(): void {
    this.inFlight -= 1;
  }

  /** An admitted socket of `user` from `address` closed, or its handshake failed: it no longer
   * counts. */
  release(user: string, address: string | undefined): void {
    this.budgets.release(user);
    if (address !== undefined) this.addresses?.remove(address);
  }

  /** A handshake refused after it was counted. */
  private settle(address: string | undefined): void {
    this.inFlight -= 1;
    if (address !== undefined) this.addresses?.remove(address);
  }

  /** Whether the `origins` option admits a cross-site page; a failing hook admits nobody. */
  private allows(origin: string, request: IncomingMessage): boolean {
    try {
      return this.origin(origin, request);
    } catch (error) {
      this.host.report(error);
      return false;
    }
  }

  /** The identity, checked, within the deadline (a HookError "timeout" past it). */
  private async identify(request: IncomingMessage): Promise<Identity> {
    const identity = await callHook(
      "authenticate",
      () => this.host.authenticate(request),
      isIdentityOrNull,
      "an identity or null",
      this.options.authTimeoutMs,
    );
    if (identity === null) throw new AuthError(401, "refused", "refused");
    return checkIdentity(identity, this.options.ids);
  }
}

/** Answers a refused upgrade with an HTTP status, then destroys the socket. */
export function answer(
  socket: Duplex,
  status: number,
  body: string,
  headers: Record<string, string | number> = {},
): void {
  if (socket.destroyed) return;
  const lines = Object.entries({
    ...headers,
    "Content-Type": "text/plain",
    "Content-Length": Buffer.byteLength(body) + 1,
    Connection: "close",
  }).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${lines.join("")}\r\n${body}\n`, () =>
    socket.destroy(),
  );
}

/** One listener for every socket: a closure would keep this call's scope alive with it. */
export function ignore(): void {}

function isWebSocketUpgrade(request: IncomingMessage): boolean {
  return (
    request.method === "GET" &&
    request.headers.upgrade?.toLowerCase() === "websocket" &&
    typeof request.headers["sec-websocket-key"] === "string"
  );
}

/** The subprotocols a request offers. */
function offered(request: IncomingMessage): string[] {
  const header = request.headers["sec-websocket-protocol"];
  return header === undefined ? [] : header.split(",").map((p) => p.trim());
}

/** Same origin: the Origin's host and port are the request's Host (the scheme may differ: TLS
 * often ends at a proxy). `Origin: null` is no origin at all. */
export function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const from = new URL(origin);
    if (from.protocol !== "http:" && from.protocol !== "https:") return false;
    return from.host === new URL(`${from.protocol}//${host}`).host;
  } catch {
    return false;
  }
}

function checkOrigins(
  origins: Origins | undefined,
): (origin: string, request: IncomingMessage) => boolean {
  if (origins === undefined) return () => false;
  if (typeof origins === "function") {
    return (origin, request) =>
      callNow("origins", () => origins(origin, request), isBoolean, "a boolean");
  }
  if (!Array.isArray(origins)) invalidOption("origins must be a list of origins or a function");
  const allowed = new Set(
    origins.map((o: unknown) => {
      if (o === "null") return o;
      try {
        if (typeof o === "string" && new URL(o).origin === o) return o;
      } catch {
        // Refused below.
      }
      return invalidOption(
        `origins must list origins like "https://app.example.com" (no path, no slash), got ${describe(o)}`,
      );
    }),
  );
  return (origin) => allowed.has(origin);
}

function checkProxies(proxies: readonly string[]): ReadonlySet<string> {
  if (!Array.isArray(proxies)) invalidOption("trustedProxies must be a list of IP addresses");
  for (const proxy of proxies as unknown[]) {
    if (typeof proxy !== "string" || isIP(proxy) === 0) {
      invalidOption(`trustedProxies must list IP addresses, got ${describe(proxy)}`);
    }
  }
  return new Set(proxies.map(plainAddress));
}

/** An IPv4 address mapped into IPv6 is the IPv4 address. */
function plainAddress(address: string): string {
  return address.startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * The client's address: the peer's, unless the peer is a trusted proxy; then the last address in
 * X-Forwarded-For that is not itself a trusted proxy (entries left of it could be forged). An
 * IPv6 address counts as its network (`ipv6PrefixBits`, /64 by default): one host holds a whole
 * /64 as easily as one address.
 */
export function clientAddress(
  request: IncomingMessage,
  proxies: ReadonlySet<string>,
  { ipv6PrefixBits }: Pick<Limits, "ipv6PrefixBits">,
): string {
  let address = plainAddress(request.socket.remoteAddress ?? "");
  if (proxies.has(address)) {
    const header = request.headers["x-forwarded-for"];
    const hops = (Array.isArray(header) ? header.join(",") : (header ?? "")).split(",");
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = plainAddress(hops[i]!.trim());
      if (isIP(hop) === 0) break;
      address = hop;
      if (!proxies.has(hop)) break;
    }
  }
  return isIP(address) === 6 ? ipv6Network(address, ipv6PrefixBits) : address;
}

/** An IPv6 address's network of `bits` bits, written in full: `2001:db8:0:0:0:0:0:0/64`. */
export function ipv6Network(address: string, bits: number): string {
  const groups = ipv6Groups(address);
  const network = groups.map((group, i) => {
    const kept = Math.max(0, Math.min(16, bits - i * 16));
    return (group & (0xffff << (16 - kept)) & 0xffff).toString(16);
  });
  return `${network.join(":")}/${bits}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::`, a zone and a trailing IPv4 allowed). */
function ipv6Groups(address: string): number[] {
  let text = address.replace(/%.*$/, "");
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}
