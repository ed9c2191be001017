import type {} from "@fastify/websocket";
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest } from "fastify";
import type { WebSocket } from "ws";
import type { Rollcall } from "../engine/rollcall.js";
import { FrameError, SUBPROTOCOLS } from "../protocol/frames.js";
import { callback, describe, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { challenge } from "../runtime/bearer.js";
import { Expiries } from "../runtime/expiries.js";
import { callHook, isBoolean } from "../runtime/hooks.js";
import { Host, HOST_OPTIONS, type HostOptions } from "../runtime/host.js";
import {
  checkIdentity,
  isIdentityOrNull,
  roomAllowed,
  type Identity,
} from "../runtime/identity.js";
import { checkLimits, frameSizes, type Limits } from "../runtime/limits.js";
import { Budgets, type RateLimit } from "../runtime/rateLimit.js";
import { Session, SESSION_SINK, type SessionHost } from "../runtime/session.js";

export interface FastifyPresenceOptions extends HostOptions {
  rollcall: Rollcall;
  /**
   * Who the upgrade request is, after your own hooks ran (a session cookie, @fastify/jwt's
   * `request.user`): an identity, or null to refuse it with 401. Async allowed, within
   * `authTimeoutMs`.
   */
  identify: (request: FastifyRequest) => Identity | null | Promise<Identity | null>;
  /** Who may join which room; without it, the identity's `rooms` must list the room. */
  authorize?: (identity: Identity, room: string) => boolean | Promise<boolean>;
  /** The route of the WebSocket endpoint. Default `/presence`. */
  path?: string;
  /** How long `identify` and `authorize` may take. Default 5 000. */
  authTimeoutMs?: number;
  /** How often each socket is pinged; one that misses a pong by the next is dead. Default 15 000. */
  pingMs?: number;
  /** Frame sizes, rates and per-user caps, as the gateway's (its process-wide caps are Fastify's). */
  limits?: Partial<Limits>;
}

/**
 * The options to register @fastify/websocket with for rollcall's protocol: the version a client
 * offers is selected (never the token beside it), frames no longer than the limits allow.
 */
export function websocketOptions(rollcall: Rollcall, limits?: Partial<Limits>) {
  return {
    maxPayload: frameSizes(checkLimits(limits), rollcall.settings.maxStateBytes).refresh,
    perMessageDeflate: false,
    handleProtocols: (offered: Set<string>) => SUBPROTOCOLS.find((p) => offered.has(p)) ?? false,
  };
}

/**
 * rollcall's WebSocket protocol on a Fastify route, an adapter over the connection host: the
 * browser client works against it as against the gateway. Register @fastify/websocket first
 * (with `websocketOptions`); each upgrade runs your hooks, then `identify`, then opens a session.
 */
export const fastifyPresence: FastifyPluginCallback<FastifyPresenceOptions> = (
  app,
  options,
  done,
) => {
  try {
    serve(app, options);
    done();
  } catch (error) {
    done(error as Error);
  }
};

function serve(app: FastifyInstance, options: FastifyPresenceOptions): void {
  const o = knownKeys(options, [
    "rollcall",
    "identify",
    "authorize",
    "path",
    "authTimeoutMs",
    "pingMs",
    "limits",
    ...HOST_OPTIONS,
  ]);
  if (!app.hasDecorator("websocketServer")) {
    invalidOption("register @fastify/websocket (with websocketOptions(rollcall)) before rollcall");
  }
  const { rollcall } = o;
  const identify = callback<FastifyPresenceOptions["identify"]>("identify", o.identify);
  if (!identify) invalidOption("identify is required: a function of the request");
  const authorize = callback<NonNullable<FastifyPresenceOptions["authorize"]>>(
    "authorize",
    o.authorize,
  );
  const path = o.path ?? "/presence";
  if (typeof path !== "string" || !path.startsWith("/")) {
    invalidOption(`path must start with /, got ${describe(path)}`);
  }
  const timeoutMs = integer("authTimeoutMs", o.authTimeoutMs ?? 5_000, 10, 600_000);
  const pingMs = integer("pingMs", o.pingMs ?? 15_000, 100, 3_600_000);
  const limits = checkLimits(o.limits);
  const report = (error: unknown) => app.log.error({ err: error }, "rollcall");
  const host = new Host<Session>(rollcall, SESSION_SINK, report, pick(o));
  const budgets = new Budgets(limits);
  const sessions = new Set<Session>();
  const expiries = new Expiries<Session>((session) => session.expire());
  const admitted = new WeakMap<FastifyRequest, { identity: Identity; rate: RateLimit }>();

  const server: SessionHost = {
    host,
    limits,
    frameBytes: frameSizes(limits, rollcall.settings.maxStateBytes).frame,
    ids: "verbatim",
    expiryLeewayMs: 0,
    expiries,
    allowed: async (identity, room) => {
      if (identity.rooms !== null && !roomAllowed(identity.rooms, room)) return false;
      if (!authorize) return identity.rooms !== null;
      const hook = () => authorize(identity, room);
      return await callHook("authorize", hook, isBoolean, "a boolean", timeoutMs);
    },
    capacity: () => undefined,
    ended: (session) => void end(session),
    reauthenticate: () => {
      const why = "this server takes no refresh: reconnect with fresh credentials";
      return Promise.reject(new FrameError("INVALID_TOKEN", why));
    },
    report,
  };
  /** A socket closed: it leaves its rooms, and no longer counts against its user. */
  const end = async (session: Session) => {
    if (!sessions.delete(session)) return;
    budgets.release(session.user);
    await session.close().catch(report);
  };
  const pinger = setInterval(() => sessions.forEach((s) => s.ping()), pingMs);
  pinger.unref();

  app.get(
    path,
    {
      websocket: true,
      // Before the upgrade: a refusal is an HTTP status, and no socket opens.
      preValidation: async (request, reply) => {
        let identity: Identity | null;
        try {
          const hook = () => identify(request);
          identity = await callHook("identify", hook, isIdentityOrNull, "an identity", timeoutMs);
          if (identity) identity = checkIdentity(identity, "verbatim");
        } catch (error) {
          report(error);
          identity = null;
        }
        if (!identity) {
          // As the gateway's: an error code when the request carried a token (RFC 6750 §3).
          const header = challenge("refused", request.raw);
          return reply.code(401).header("WWW-Authenticate", header).send("refused: no identity");
        }
        const rate = budgets.take(identity.user);
        if (!rate) return reply.code(429).header("Retry-After", 10).send("too many sockets");
        admitted.set(request, { identity, rate });
      },
    },
    (ws: WebSocket, request: FastifyRequest) => {
      const entry = admitted.get(request)!;
      if (!SUBPROTOCOLS.includes(ws.protocol)) {
        budgets.release(entry.identity.user);
        return ws.close(1002, `offer a subprotocol among ${SUBPROTOCOLS.join(", ")}`);
      }
      const session = new Session(server, ws, entry.identity, entry.rate);
      sessions.add(session);
      session.open();
    },
  );

  app.addHook("onClose", async () => {
    clearInterval(pinger);
    expiries.stop();
    await Promise.all([...sessions].map(end));
    await host.close();
  });
}

/** The host's options, of the plugin's. */
function pick(options: FastifyPresenceOptions): HostOptions {
  const entries = HOST_OPTIONS.filter((name) => options[name] !== undefined);
  return Object.fromEntries(entries.map((name) => [name, options[name]]));
}
