import type { IncomingMessage } from "node:http";
import type { IdPolicy } from "../protocol/ids.js";
import { callback, describe, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { callHook, callNow, isBoolean, type Expect } from "../runtime/hooks.js";
import { HOST_OPTIONS, type HostOptions } from "../runtime/host.js";
import type { SweeperOptions } from "../runtime/sweeper.js";
import type { Subscriber } from "../runtime/subscriber.js";
import type { Identity } from "../runtime/identity.js";
import type { Authenticate, JwtOptions } from "./auth.js";
import { checkJwtOptions, type CheckedJwtOptions } from "./jwt.js";
import { checkLimits, type Limits } from "../runtime/limits.js";
import type { Origins } from "./upgrade.js";

export interface GatewayOptions {
  /** Verify JWTs (HS256 secret or local JWKS): the user is `sub`, the rooms the `rooms` claim. */
  jwt?: JwtOptions;
  /** Or establish identities yourself from the upgrade request (throw an AuthError to refuse). */
  authenticate?: Authenticate;
  /** Decides who may join which room; without it, the identity's `rooms` must list the room. */
  authorize?: (identity: Identity, room: string) => boolean | Promise<boolean>;
  /**
   * Decides whose online status a socket may follow (a `follow-users` frame, up to 1,000 users):
   * true for all of them, false to refuse (FORBIDDEN), or the ones allowed (the others are
   * `denied` in the answer). Without it no socket follows anyone: a user's status is private.
   * Each following socket holds one live contact list (a UserWatch of the gateway's Subscriber).
   */
  authorizeUsers?: (identity: Identity, users: readonly string[]) => AllowedUsers;
  /** Most members a room may hold (or a function of the room: undefined for no limit): a join
   * beyond it gets ROOM_FULL. A user already in the room always gets in. Default: no limit. */
  capacity?: number | ((room: string) => number | undefined);
  /** The URL path of the WebSocket endpoint. Default `/presence`. */
  path?: string;
  /**
   * Pages of other origins allowed to open sockets: a list (`["https://app.example.com"]`), or a
   * function of the Origin header. A request without Origin (not a browser) and a same-origin one
   * (the Origin's host and port are the Host's) always pass. Default: none (403).
   */
  origins?: Origins;
  /**
   * Proxies whose X-Forwarded-For names the client, by IP address: only for the per-address cap.
   * Default none: the client is the peer of the TCP connection.
   */
  trustedProxies?: readonly string[];
  /** How long `authenticate` (a refresh, `authorize`, `authorizeUsers`) may take before a
   * refusal. Default 5 000. */
  authTimeoutMs?: number;
  /** The process's Subscriber; by default the gateway makes its own. */
  subscriber?: Subscriber;
  /** Runs a Sweeper while open (true, or its options); false if the process runs its own. Default true. */
  sweeper?: boolean | SweeperOptions;
  /** How often the gateway heartbeats each joined room. Default a third of the presence window. */
  heartbeatMs?: number;
  /** How often each socket is pinged; one that misses a pong by the next is dead. Default 15 000. */
  pingMs?: number;
  /**
   * Large rooms' events are coalesced: in a room of `fromMembers` members or more, a socket gets
   * them at most every `intervalMs`, together (one `events` frame in protocol version 2). Smaller
   * rooms' go out at once. Defaults 100 and 50 (see docs/design.md).
   */
  coalesce?: { fromMembers?: number; intervalMs?: number };
  /** A watched room's count frames go out at most this often. Default 1 000. */
  countIntervalMs?: number;
  limits?: Partial<Limits>;
  /**
   * `strict` refuses user ids (from tokens and hooks) and room ids (from frames) that render like
   * others: not in NFKC form, holding control, format (bidi, zero-width), private-use or
   * unassigned characters or a space other than U+0020, or mixing scripts (Latin with
   * Cyrillic). Default `verbatim`: any id the engine takes, kept as it came.
   */
  ids?: IdPolicy;
}

/** What `authorizeUsers` answers: all, none, or the users allowed. */
export type AllowedUsers = boolean | readonly string[] | Promise<boolean | readonly string[]>;

/** The options a gateway runs with: checked, with defaults, hooks wrapped to fail safely. */
export interface GatewayConfig {
  readonly jwt: CheckedJwtOptions | undefined;
  readonly authenticate: ((request: IncomingMessage) => unknown) | undefined;
  readonly authorize: ((identity: Identity, room: string) => Promise<boolean>) | undefined;
  readonly authorizeUsers:
    | ((identity: Identity, users: readonly string[]) => Promise<boolean | readonly string[]>)
    | undefined;
  readonly capacity: (room: string) => number | undefined;
  readonly path: string;
  readonly origins: Origins | undefined;
  readonly trustedProxies: readonly string[];
  readonly authTimeoutMs: number;
  readonly pingMs: number;
  readonly limits: Limits;
  readonly ids: IdPolicy;
  readonly host: HostOptions;
}

/** The most members a room may hold (what the engine takes), or undefined for no limit. */
const isCapacity: Expect<number | undefined> = (value): value is number | undefined =>
  value === undefined ||
  (Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= 1_000_000_000);

const isAllowedUsers: Expect<boolean | readonly string[]> = (
  value,
): value is boolean | readonly string[] =>
  typeof value === "boolean" ||
  (Array.isArray(value) && value.every((user) => typeof user === "string"));

/** Checks a gateway's options: every mistake is a typed INVALID_OPTION error. */
export function checkGatewayOptions(options: GatewayOptions): GatewayConfig {
  const o = knownKeys(options, [
    "jwt",
    "authenticate",
    "authorize",
    "authorizeUsers",
    "capacity",
    "path",
    "origins",
    "trustedProxies",
    "authTimeoutMs",
    "pingMs",
    "limits",
    "ids",
    ...HOST_OPTIONS,
  ]);
  if ((o.jwt === undefined) === (o.authenticate === undefined)) {
    invalidOption("a gateway needs exactly one of jwt and authenticate");
  }
  const authTimeoutMs = integer("authTimeoutMs", o.authTimeoutMs ?? 5_000, 10, 600_000);
  const authorize = callback<NonNullable<GatewayOptions["authorize"]>>("authorize", o.authorize);
  const authorizeUsers = callback<NonNullable<GatewayOptions["authorizeUsers"]>>(
    "authorizeUsers",
    o.authorizeUsers,
  );
  const capacity =
    typeof o.capacity === "number"
      ? integer("capacity", o.capacity, 1, 1_000_000_000)
      : callback<(room: string) => number | undefined>("capacity", o.capacity);
  const path = o.path ?? "/presence";
  if (typeof path !== "string" || !path.startsWith("/")) {
    invalidOption(`path must start with /, got ${describe(path)}`);
  }
  const ids = o.ids ?? "verbatim";
  if (ids !== "verbatim" && ids !== "strict") {
    invalidOption(`ids must be "verbatim" or "strict", got ${describe(ids)}`);
  }
  return {
    jwt: o.jwt === undefined ? undefined : checkJwtOptions(o.jwt),
    authenticate: callback<Authenticate>("authenticate", o.authenticate),
    authorize:
      authorize &&
      ((identity, room) =>
        callHook(
          "authorize",
          () => authorize(identity, room),
          isBoolean,
          "a boolean",
          authTimeoutMs,
        )),
    authorizeUsers:
      authorizeUsers &&
      ((identity, users) =>
        callHook(
          "authorizeUsers",
          () => authorizeUsers(identity, users),
          isAllowedUsers,
          "a boolean or a list of user ids",
          authTimeoutMs,
        )),
    capacity:
      typeof capacity === "function"
        ? (room) => callNow("capacity", () => capacity(room), isCapacity, "a capacity")
        : () => capacity,
    path,
    origins: o.origins,
    trustedProxies: o.trustedProxies ?? [],
    authTimeoutMs,
    pingMs: integer("pingMs", o.pingMs ?? 15_000, 100, 3_600_000),
    limits: checkLimits(o.limits),
    ids,
    host: Object.fromEntries(
      HOST_OPTIONS.filter((name) => o[name] !== undefined).map((name) => [name, o[name]]),
    ),
  };
}
