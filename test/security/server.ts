// A gateway as a process of its own, for the security suite: the suite attacks it over raw sockets
// as a client on the internet would. Its settings come as JSON in SECURITY_GATEWAY; over IPC it
// says where it listens, answers `stats` with its descriptors, sockets and reported errors, moves
// its fake clock on (`advance`) and lets its held hook answer (`release`).
import { install } from "@sinonjs/fake-timers";
import { readdirSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import {
  AuthError,
  bearerToken,
  Gateway,
  refreshOf,
  type GatewayOptions,
  type Identity,
  type Limits,
} from "../../src/gateway/index.js";
import { Rollcall, type RollcallOptions } from "../../src/index.js";

export interface ServerConfig {
  redisUrl: string;
  engine?: RollcallOptions;
  /** jwt: HS256 with `secret`; hook: a cookie `session=<user>` at the upgrade, or a token
   * `u.<user>.<expiresAt ms>.<rooms, + separated>`, at the upgrade and at a refresh. */
  mode: "jwt" | "hook";
  secret: string;
  /** With mode jwt: verify with this JWKS instead of the secret. */
  jwks?: { keys: Record<string, unknown>[] };
  /** Attach to a server of the process's own (which also serves plain pages) instead of listen(). */
  attach?: boolean;
  /** The hook answers only once the suite releases it (GatewayProcess.release). */
  holdHook?: boolean;
  /** Date and the interval timers (the gateway's expiry checks) are fake: they flow with real
   * time, and the suite moves them on at once (GatewayProcess.advance). */
  fakeClock?: boolean;
  /** With fakeClock: setTimeout too (the cut of a socket that does not finish its close). */
  fakeTimeouts?: boolean;
  jwt?: { clockToleranceMs?: number; allowNoExpiry?: boolean };
  origins?: string[];
  trustedProxies?: string[];
  authTimeoutMs?: number;
  pingMs?: number;
  limits?: Partial<Limits>;
  ids?: "strict";
  /** Hooks that misbehave on request (see `behave`): `authenticate` (mode hook) and `origins` as
   * the X-Hook and X-Hook-Origin headers say, `authenticate` at a refresh as its token starts
   * (`hook-<kind>`), `authorizeUsers` as the first user's id starts (`hook-<kind>-…`),
   * `authorize` and `capacity` as the room's name starts (`hook-<kind>-…`,
   * `cap-<kind>-…`; `later-<kind>-…`: `authorize` misbehaves only for an identity with an
   * expiry, so a socket of a token without one joins, and a refresh to one with it asks again). */
  misbehave?: boolean;
  /** The origins function a user would write: it throws on `Origin: null`. */
  originsBySuffix?: boolean;
  /** The 'error' listener throws after it records the error. */
  errorListenerThrows?: boolean;
  /** With attach: the host server's header, request and keep-alive timeouts. */
  hostTimeoutMs?: number;
}

/** A hook's misbehaviour: throw, reject, hang, or junk of some type; anything else is normal. */
function behave(kind: string | undefined, normal: () => unknown): unknown {
  switch (kind) {
    case "throw":
      throw new Error("the hook threw");
    case "reject":
      return Promise.reject(new Error("the hook rejected"));
    case "hang":
      return new Promise(() => undefined);
    case "junk":
      return 42;
    case "junkstring":
      return "yes";
    case "junkobject":
      return { user: 7 };
    case "junknull":
      return null;
    default:
      return normal();
  }
}

const kindOf = (prefix: string, room: string) =>
  room.startsWith(prefix) ? room.slice(prefix.length).split("-")[0] : undefined;
const header = (request: IncomingMessage, name: string) => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

export type ToServer =
  { type: "stats"; id: number } | { type: "advance"; id: number; ms: number } | { type: "release" };

export type FromServer =
  | { type: "listening"; port: number }
  | { type: "stats"; id: number; stats: ServerStats }
  | { type: "advanced"; id: number };

export interface ServerStats {
  /** Open file descriptors of the process. */
  fds: number;
  connections: number;
  handshakes: number;
  errors: string[];
}

const config = JSON.parse(process.env.SECURITY_GATEWAY ?? "") as ServerConfig;
// Installed before the gateway sets its timers.
const clock = config.fakeClock
  ? install({
      now: Date.now(),
      toFake: [
        "Date",
        "setInterval",
        "clearInterval",
        ...(config.fakeTimeouts ? (["setTimeout", "clearTimeout"] as const) : []),
      ],
      shouldAdvanceTime: true,
    })
  : undefined;
let release: () => void = () => undefined;
const released = new Promise<void>((resolve) => (release = resolve));
const redis = new Redis(config.redisUrl);
const rollcall = new Rollcall(redis, { leaveGraceMs: 0, ...config.engine });
await rollcall.ready();

function fromToken(token: string): Identity {
  const [kind, user, expires, rooms] = token.split(".");
  if (kind !== "u" || !user) throw new AuthError(401, "invalid-token", "not a hook token");
  return {
    user,
    rooms: rooms ? rooms.split("+") : ["*"],
    expiresAt: expires ? Number(expires) : null,
  };
}

const normalHook = async (request: IncomingMessage): Promise<Identity | null> => {
  if (config.holdHook) await released;
  const token = bearerToken(request);
  if (token) return fromToken(token);
  if (refreshOf(request)) return null;
  const session = /(?:^|;\s*)session=([^;]+)/.exec(request.headers.cookie ?? "")?.[1];
  return session ? { user: session, rooms: ["*"] } : null;
};
/** How the hook is told to misbehave: by a header at the upgrade, by its token at a refresh. */
const hookKind = (request: IncomingMessage) =>
  refreshOf(request) ? kindOf("hook-", bearerToken(request) ?? "") : header(request, "x-hook");
const hook = (
  config.misbehave
    ? (request: IncomingMessage) => behave(hookKind(request), () => normalHook(request))
    : normalHook
) as GatewayOptions["authenticate"];

const misbehaving: Partial<GatewayOptions> = config.misbehave
  ? {
      authorize: ((identity: Identity, room: string) =>
        behave(
          kindOf("hook-", room) ?? (identity.expiresAt ? kindOf("later-", room) : undefined),
          () => true,
        )) as GatewayOptions["authorize"],
      authorizeUsers: ((_identity: Identity, users: readonly string[]) =>
        behave(kindOf("hook-", users[0] ?? ""), () => true)) as GatewayOptions["authorizeUsers"],
      capacity: ((room: string) =>
        behave(kindOf("cap-", room), () => undefined)) as GatewayOptions["capacity"],
      origins: ((_origin: string, request: IncomingMessage) =>
        behave(header(request, "x-hook-origin"), () => true)) as GatewayOptions["origins"],
    }
  : {};

const gateway = new Gateway(rollcall, {
  ...(config.mode === "jwt"
    ? {
        jwt: {
          ...(config.jwks ? { jwks: config.jwks } : { secret: config.secret }),
          ...config.jwt,
        },
      }
    : { authenticate: hook }),
  sweeper: false,
  ...(config.origins ? { origins: config.origins } : {}),
  ...(config.originsBySuffix
    ? { origins: (origin: string) => new URL(origin).hostname.endsWith(".example.com") }
    : {}),
  ...misbehaving,
  ...(config.ids ? { ids: config.ids } : {}),
  ...(config.trustedProxies ? { trustedProxies: config.trustedProxies } : {}),
  ...(config.authTimeoutMs ? { authTimeoutMs: config.authTimeoutMs } : {}),
  ...(config.pingMs ? { pingMs: config.pingMs } : {}),
  ...(config.limits ? { limits: config.limits } : {}),
});
const errors: string[] = [];
gateway.on("error", (error) => {
  errors.push(`${error.name}: ${error.message}`);
  if (config.errorListenerThrows) throw new Error("the error listener threw");
});
// A process that took a crash from the gateway would exit: the suite sees it in `stats`.
process.on("warning", (warning) => errors.push(`warning ${warning.name}: ${warning.message}`));

let port: number;
if (config.attach) {
  // A host that bounds its own requests, as docs/internet.md advises, when told to.
  const bound = config.hostTimeoutMs;
  const server = createServer(
    bound === undefined
      ? {}
      : {
          headersTimeout: bound,
          requestTimeout: bound,
          keepAliveTimeout: bound,
          connectionsCheckingInterval: Math.min(1_000, bound),
        },
    (_request, response) => response.end("a page\n"),
  );
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
} else {
  port = (await gateway.listen(0)).port;
}

process.on("message", (message: ToServer) => {
  if (message.type === "release") return release();
  if (message.type === "advance") {
    if (!clock) throw new Error("advance: this process has no fakeClock");
    clock.tick(message.ms);
    return void process.send?.({ type: "advanced", id: message.id } satisfies FromServer);
  }
  const stats: ServerStats = {
    fds: readdirSync("/proc/self/fd").length,
    connections: gateway.connections,
    handshakes: gateway.handshakes,
    errors,
  };
  process.send?.({ type: "stats", id: message.id, stats } satisfies FromServer);
});
const stop = () => {
  setTimeout(() => process.exit(0), 3_000).unref();
  void gateway.close().finally(() => {
    redis.disconnect();
    process.exit(0);
  });
};
process.on("disconnect", stop);
process.on("SIGTERM", stop);
process.send?.({ type: "listening", port } satisfies FromServer);
