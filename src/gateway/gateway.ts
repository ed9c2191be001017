import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { WebSocket, WebSocketServer } from "ws";
import type { Rollcall } from "../engine/rollcall.js";
import { FrameError, SUBPROTOCOLS } from "../protocol/frames.js";
import { reportError } from "../runtime/background.js";
import { callHook, HookError } from "../runtime/hooks.js";
import { Host } from "../runtime/host.js";
import { Expiries } from "../runtime/expiries.js";
import { requirePeer } from "../runtime/peer.js";
import {
  AuthError,
  checkIdentity,
  isIdentityOrNull,
  roomAllowed,
  type Identity,
} from "../runtime/identity.js";
import { CLOSE, Session, SESSION_SINK, type SessionHost } from "../runtime/session.js";
import { bearerToken, refreshRequest, targetOf } from "./auth.js";
import { jwtVerifier, type Verify } from "./jwt.js";
import { frameSizes, tokenTooLong, type Limits } from "../runtime/limits.js";
import { Lobby } from "./lobby.js";
import { checkGatewayOptions, type GatewayConfig, type GatewayOptions } from "./options.js";
import { Admission, answer, ignore, type Admitted } from "./upgrade.js";

export type { GatewayOptions } from "./options.js";

// ws, an optional peer, through require(): missing, the import of rollcall/gateway says so.
const ws = requirePeer<typeof import("ws")>("ws", "rollcall/gateway");
/** Connections waiting to be accepted, at most (Linux caps it at net.core.somaxconn). */
const ACCEPT_BACKLOG = 65_535;

interface GatewayEvents {
  /** Something the host should know: Redis unreachable, a failing hook, … Never thrown. */
  error: [error: Error];
}

/**
 * Presence over WebSocket (`ws`): admits each upgrade (src/gateway/upgrade.ts), makes each socket
 * a connection of the host (src/runtime/host.ts) that keeps its rooms alive and fed, closes a
 * socket when its token expires unless it was refreshed, and leaves every room of a socket when
 * it closes, cleanly or not. Attach it to your own http.Server, or let it listen.
 */
export class Gateway extends EventEmitter<GatewayEvents> {
  readonly limits: Limits;
  readonly heartbeatMs: number;
  readonly path: string;
  private readonly config: GatewayConfig;
  /** The identity of an upgrade request (unchecked: the admission checks what it gets). */
  private readonly identify: (request: IncomingMessage) => unknown;
  private readonly verify: Promise<Verify> | undefined;
  private readonly admission: Admission;
  private readonly host: Host<Session>;
  private readonly expiries = new Expiries<Session>((session) => session.expire());
  private readonly sessionHost: SessionHost;
  private readonly keepClaims: boolean;
  private readonly wss: WebSocketServer;
  /** Every open socket's session, and the address it counts against (if capped). */
  private readonly sessions = new Map<Session, string | undefined>();
  private readonly pinger: NodeJS.Timeout;
  private readonly closing = new Set<Promise<void>>();
  private server: Server | undefined;
  /** With listen(): the connections that have not sent their request yet. */
  private lobby: Lobby | undefined;
  private isClosed = false;

  constructor(
    readonly rollcall: Rollcall,
    options: GatewayOptions,
  ) {
    super();
    const config = checkGatewayOptions(options);
    this.config = config;
    const { jwt, limits } = config;
    if (jwt) {
      // jose is loaded only here, when JWTs are what the gateway verifies.
      this.verify = jwtVerifier(jwt);
      this.verify.catch((error: unknown) => this.report(error));
      this.identify = async (request) => {
        const token = bearerToken(request);
        if (!token) throw new AuthError(401, "no-token", "no token");
        return (await this.verify!)(token);
      };
    } else {
      this.identify = config.authenticate!;
    }
    this.keepClaims = config.authorize !== undefined || config.authorizeUsers !== undefined;
    this.limits = limits;
    this.path = config.path;
    // The admission checks the origins and proxies it is given: before the host opens anything.
    this.admission = new Admission(
      {
        metrics: rollcall.metrics,
        sockets: () => this.sessions.size,
        closed: () => this.isClosed,
        authenticate: (request) => this.identify(request),
        report: (error) => this.report(error),
      },
      {
        limits,
        ids: config.ids,
        origins: config.origins,
        trustedProxies: config.trustedProxies,
        authTimeoutMs: config.authTimeoutMs,
      },
    );
    this.host = new Host<Session>(
      rollcall,
      SESSION_SINK,
      (error) => this.report(error),
      config.host,
    );
    this.heartbeatMs = this.host.heartbeatMs;
    const frames = frameSizes(limits, rollcall.settings.maxStateBytes);
    this.sessionHost = {
      host: this.host,
      limits,
      frameBytes: frames.frame,
      longFrames: frames,
      ids: config.ids,
      expiryLeewayMs: jwt?.clockToleranceMs ?? 0,
      expiries: this.expiries,
      allowed: (identity, room) => this.allowed(identity, room),
      capacity: config.capacity,
      ...(config.authorizeUsers ? { authorizeUsers: config.authorizeUsers } : {}),
      ended: (session) => void this.end(session),
      reauthenticate: async (token, current) =>
        this.kept(await this.reauthenticate(token, current)),
      report: (error) => this.report(error),
    };
    this.wss = new ws.WebSocketServer({
      noServer: true,
      clientTracking: false,
      // A refresh or a follow-users may be the longest frame: any other past `frames.frame` is
      // closed with 1009.
      maxPayload: Math.max(frames.refresh, frames.follow),
      perMessageDeflate: false,
      // The newest version the client offers, never the token entry a browser offers beside it.
      handleProtocols: (protocols) => SUBPROTOCOLS.find((p) => protocols.has(p)) ?? false,
    });
    this.pinger = setInterval(() => this.ping(), config.pingMs);
    this.pinger.unref();
  }

  /** Sockets open now. */
  get connections(): number {
    return this.sessions.size;
  }

  /** Upgrades being admitted now: counted with the open sockets against `maxSockets`. */
  get handshakes(): number {
    return this.admission.handshakes;
  }

  /**
   * Handles WebSocket upgrades to `path` on your server. Another path is left to the server's
   * other `upgrade` listeners; with none, it is answered 404 (400 for a target the URL parser
   * refuses) and its socket destroyed (a socket nobody answers would stay open for good).
   */
  attach(server: Server): this {
    const listener = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      this.lobby?.served(socket);
      const target = targetOf(request);
      if (target?.pathname === this.path) {
        void this.handleUpgrade(request, socket, head);
      } else if (server.listenerCount("upgrade") === 1) {
        socket.on("error", ignore);
        const [reason, status, message] =
          target === undefined
            ? (["bad-request", 400, "the request target cannot be parsed"] as const)
            : (["not-found", 404, "no WebSocket endpoint here"] as const);
        this.rollcall.metrics.add("rollcall.gateway.refusals", 1, { reason });
        answer(socket, status, `${reason}: ${message}`);
      }
    };
    server.on("upgrade", listener);
    return this;
  }

  /**
   * Listens on a port of its own (0: any free one); plain HTTP requests get 426. A connection
   * must send its request within `limits.requestTimeoutMs`, and until it has, it counts against
   * `limits.maxSockets` (the oldest such one is dropped when a new connection needs the room).
   */
  async listen(port = 0, host = "127.0.0.1"): Promise<AddressInfo> {
    const { requestTimeoutMs } = this.limits;
    const server = createServer(
      {
        headersTimeout: requestTimeoutMs,
        requestTimeout: requestTimeoutMs,
        connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs),
      },
      (request, response) => {
        this.lobby?.served(request.socket);
        response
          .writeHead(426, { "Content-Type": "text/plain", Connection: "close" })
          .end("WebSocket only\n");
      },
    );
    this.lobby = new Lobby(
      () => this.sessions.size + this.admission.handshakes,
      this.limits.maxSockets,
      (reason) => this.rollcall.metrics.add("rollcall.gateway.refusals", 1, { reason }),
    );
    server.on("connection", (socket: Socket) => this.lobby!.arrived(socket));
    this.attach(server);
    this.server = server;
    if (this.verify) await this.verify;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      // The accept queue as long as the kernel allows (net.core.somaxconn caps it): a gateway's
      // share of a reconnect storm arrives within a second, and a connection the queue drops
      // waits for its SYN to be sent again (1 s, then 3 s, …) before its backoff even starts.
      server.listen({ port, host, backlog: ACCEPT_BACKLOG }, () => resolve());
    });
    // After listening, a server error (an accept that failed) is reported, never thrown.
    server.on("error", (error) => this.report(error));
    return server.address() as AddressInfo;
  }

  /**
   * Admits an upgrade and opens the socket, or answers it with an HTTP status and drops it. It
   * never rejects: what fails is answered (500) and reported.
   */
  async handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    try {
      const admitted = await this.admission.admit(request, socket);
      if (!admitted) return;
      let opened = false;
      try {
        this.wss.handleUpgrade(request, socket, head, (ws) => {
          opened = true;
          this.open(ws, admitted);
        });
      } finally {
        this.admission.opened();
        // ws answered 400 itself (a bad key or version): the socket never opened.
        if (!opened) this.admission.release(admitted.identity.user, admitted.address);
      }
    } catch (error) {
      this.report(error);
      socket.on("error", ignore);
      answer(socket, 500, "internal: the upgrade failed");
    }
  }

  /** Closes every socket (each leaves its rooms), then what the gateway started. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    clearInterval(this.pinger);
    this.expiries.stop();
    for (const session of this.sessions.keys()) session.shut(CLOSE.goingAway, "server closing");
    await Promise.all([...this.sessions.keys()].map((s) => this.end(s)));
    await Promise.all(this.closing);
    await this.host.close();
    this.wss.close();
    const server = this.server;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  /** Reports an error to 'error' listeners, or as a process warning: never thrown. */
  report(error: unknown): void {
    reportError(this, error);
  }

  /** Whether an identity may be in a room: its token's rooms and the `authorize` hook agree. */
  private async allowed(identity: Identity, room: string): Promise<boolean> {
    if (identity.rooms !== null && !roomAllowed(identity.rooms, room)) return false;
    const { authorize } = this.config;
    if (authorize) return await authorize(identity, room);
    return identity.rooms !== null;
  }

  /**
   * What a socket keeps of its identity: the claims only for an `authorize` or `authorizeUsers`
   * hook, the only ones that read them (an idle socket should cost little).
   */
  private kept(identity: Identity): Identity {
    if (this.keepClaims || identity.claims === undefined) return identity;
    const { user, rooms, expiresAt, invisible } = identity;
    return { user, rooms, expiresAt, ...(invisible === true ? { invisible } : {}) };
  }

  private open(ws: WebSocket, admitted: Admitted): void {
    // The session keeps what it needs of the admission: the request's full identity (claims and
    // all) goes with it.
    const session = new Session(this.sessionHost, ws, this.kept(admitted.identity), admitted.rate);
    this.sessions.set(session, admitted.address);
    this.rollcall.metrics.add("rollcall.gateway.sockets", 1, {}, true);
    session.open();
  }

  private end(session: Session): Promise<void> {
    if (!this.sessions.has(session)) return Promise.resolve();
    const address = this.sessions.get(session);
    this.sessions.delete(session);
    this.admission.release(session.user, address);
    this.rollcall.metrics.add("rollcall.gateway.sockets", -1, {}, true);
    const ended = session
      .close()
      .catch((error: unknown) => this.report(error))
      .finally(() => this.closing.delete(ended));
    this.closing.add(ended);
    return ended;
  }

  /** A refresh frame's token, through the JWT verifier or the `authenticate` hook. */
  private async reauthenticate(token: string, current: Identity): Promise<Identity> {
    try {
      if (tokenTooLong(token, this.limits)) {
        throw new AuthError(401, "invalid-token", `longer than ${this.limits.maxTokenBytes} bytes`);
      }
      const verify = this.verify && (await this.verify);
      const identity = await callHook(
        "authenticate",
        () => (verify ? verify(token) : this.identify(refreshRequest(token, current, this.path))),
        isIdentityOrNull,
        "an identity or null",
        this.config.authTimeoutMs,
      );
      if (identity === null) throw new AuthError(401, "refused", "refused");
      return checkIdentity(identity, this.config.ids);
    } catch (error) {
      if (!(error instanceof AuthError)) this.report(error);
      const reason =
        error instanceof AuthError
          ? `${error.reason}: ${error.message}`
          : error instanceof HookError && error.failure === "timeout"
            ? "it took too long"
            : "refused";
      throw new FrameError("INVALID_TOKEN", `the refresh was refused (${reason})`);
    }
  }

  private ping(): void {
    for (const session of this.sessions.keys()) session.ping();
  }
}
