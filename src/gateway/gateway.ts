import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { WebSocket, WebSocketServer } from "ws";
import type { Rollcall } from "../engine/rollcall.js";
import { FrameError, SUBPROTOCOLS } from "../protocol/frames.js";
import type { IdPolicy } from "../protocol/ids.js";
import { callback, describe, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { reportError } from "../runtime/background.js";
import { callHook, callNow, HookError, isBoolean, type Expect } from "../runtime/hooks.js";
import { heartbeatInterval } from "../runtime/heartbeats.js";
import { requirePeer } from "../runtime/peer.js";
import { Subscriber } from "../runtime/subscriber.js";
import { ownSweeper, type Sweeper, type SweeperOptions } from "../runtime/sweeper.js";
import {
  AuthError,
  bearerToken,
  refreshRequest,
  targetOf,
  type Authenticate,
  type Identity,
  type JwtOptions,
} from "./auth.js";
import { Expiries } from "./expiries.js";
import { checkJwtOptions, jwtVerifier, type Verify } from "./jwt.js";
import { checkLimits, frameSizes, type Limits } from "./limits.js";
import { Lobby } from "./lobby.js";
import { Rooms } from "./rooms.js";
import { CLOSE, Session, type SessionHost } from "./session.js";
import {
  Admission,
  answer,
  checkIdentity,
  ignore,
  isIdentityOrNull,
  type Admitted,
  type Origins,
} from "./upgrade.js";

// ws, an optional peer, through require(): missing, the import of rollcall/gateway says so.
const ws = requirePeer<typeof import("ws")>("ws", "rollcall/gateway");
const SESSION = Symbol("session");
/** Connections waiting to be accepted, at most (Linux caps it at net.core.somaxconn). */
const ACCEPT_BACKLOG = 65_535;
type Tagged = WebSocket & { [SESSION]: Session };

function onPong(this: WebSocket): void {
  (this as Tagged)[SESSION].alive = true;
}
function onMessage(this: WebSocket, data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) {
  (this as Tagged)[SESSION].receive(data, isBinary);
}
function onClose(this: WebSocket): void {
  (this as Tagged)[SESSION].ended();
}
/** ws closes a socket itself on a protocol error (1002, 1007, 1009): it acts no more either. */
function onError(this: WebSocket): void {
  (this as Tagged)[SESSION].shut();
}

export interface GatewayOptions {
  /** Verify JWTs (HS256 secret or local JWKS): the user is `sub`, the rooms the `rooms` claim. */
  jwt?: JwtOptions;
  /** Or establish identities yourself from the upgrade request (throw an AuthError to refuse). */
  authenticate?: Authenticate;
  /** Decides who may join which room; without it, the identity's `rooms` must list the room. */
  authorize?: (identity: Identity, room: string) => boolean | Promise<boolean>;
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
  /** How long `authenticate` (or a refresh) may take before the upgrade gets 503. Default 5 000. */
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

/** The most members a room may hold (what the engine takes), or undefined for no limit. */
const isCapacity: Expect<number | undefined> = (value): value is number | undefined =>
  value === undefined ||
  (Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= 1_000_000_000);

interface GatewayEvents {
  /** Something the host should know: Redis unreachable, a failing hook, … Never thrown. */
  error: [error: Error];
}

/**
 * Presence over WebSocket (`ws`): admits each upgrade (src/gateway/upgrade.ts), keeps every
 * socket's rooms alive and fed (rooms.ts), closes a socket when its token expires unless it was
 * refreshed, and leaves every room of a socket when it closes, cleanly or not. Attach it to your
 * own http.Server, or let it listen.
 */
export class Gateway extends EventEmitter<GatewayEvents> {
  readonly limits: Limits;
  readonly heartbeatMs: number;
  readonly path: string;
  /** What a user or room id may hold, beyond what every id must (see GatewayOptions.ids). */
  readonly ids: IdPolicy;
  private readonly identify: (request: IncomingMessage) => Promise<Identity | null>;
  private readonly verify: Promise<Verify> | undefined;
  private readonly admission: Admission;
  private readonly rooms: Rooms;
  private readonly expiries = new Expiries<Session>((session) => session.expire());
  private readonly host: SessionHost;
  private readonly keepClaims: boolean;
  private readonly wss: WebSocketServer;
  private readonly sessions = new Map<Session, Admitted>();
  private readonly subscriber: Subscriber;
  private readonly ownsSubscriber: boolean;
  private readonly sweeper: Sweeper | undefined;
  private readonly pinger: NodeJS.Timeout;
  private readonly closing = new Set<Promise<void>>();
  private readonly authTimeoutMs: number;
  private server: Server | undefined;
  /** With listen(): the connections that have not sent their request yet. */
  private lobby: Lobby | undefined;
  private isClosed = false;

  constructor(
    readonly rollcall: Rollcall,
    options: GatewayOptions,
  ) {
    super();
    const o = knownKeys(options, [
      "jwt",
      "authenticate",
      "authorize",
      "capacity",
      "path",
      "origins",
      "trustedProxies",
      "authTimeoutMs",
      "subscriber",
      "sweeper",
      "heartbeatMs",
      "pingMs",
      "coalesce",
      "countIntervalMs",
      "limits",
      "ids",
    ]);
    if ((o.jwt === undefined) === (o.authenticate === undefined)) {
      invalidOption("a gateway needs exactly one of jwt and authenticate");
    }
    let expiryLeewayMs = 0;
    if (o.jwt !== undefined) {
      const jwt = checkJwtOptions(o.jwt);
      expiryLeewayMs = jwt.clockToleranceMs;
      // jose is loaded only here, when JWTs are what the gateway verifies.
      this.verify = jwtVerifier(jwt);
      this.verify.catch((error: unknown) => this.report(error));
      this.identify = async (request) => {
        const token = bearerToken(request);
        if (!token) throw new AuthError(401, "no-token", "no token");
        return (await this.verify!)(token);
      };
    } else {
      const hook = callback<Authenticate>("authenticate", o.authenticate)!;
      this.identify = async (request) => hook(request);
    }
    const authorize = callback<NonNullable<GatewayOptions["authorize"]>>("authorize", o.authorize);
    this.keepClaims = authorize !== undefined;
    const capacity =
      typeof o.capacity === "number"
        ? integer("capacity", o.capacity, 1, 1_000_000_000)
        : callback<(room: string) => number | undefined>("capacity", o.capacity);
    this.path = o.path ?? "/presence";
    if (typeof this.path !== "string" || !this.path.startsWith("/")) {
      invalidOption(`path must start with /, got ${describe(this.path)}`);
    }
    this.limits = checkLimits(o.limits);
    this.heartbeatMs = heartbeatInterval(rollcall, o.heartbeatMs);
    const pingMs = integer("pingMs", o.pingMs ?? 15_000, 100, 3_600_000);
    this.authTimeoutMs = integer("authTimeoutMs", o.authTimeoutMs ?? 5_000, 10, 600_000);
    this.ids = o.ids ?? "verbatim";
    if (this.ids !== "verbatim" && this.ids !== "strict") {
      invalidOption(`ids must be "verbatim" or "strict", got ${describe(this.ids)}`);
    }
    this.admission = new Admission(
      {
        metrics: rollcall.metrics,
        sockets: () => this.sessions.size,
        closed: () => this.isClosed,
        authenticate: (request) => this.identify(request),
        report: (error) => this.report(error),
      },
      {
        limits: this.limits,
        ids: this.ids,
        origins: o.origins,
        trustedProxies: o.trustedProxies ?? [],
        authTimeoutMs: this.authTimeoutMs,
      },
    );

    this.ownsSubscriber = o.subscriber === undefined;
    this.subscriber = o.subscriber ?? new Subscriber(rollcall);
    if (this.ownsSubscriber) this.subscriber.on("error", (error) => this.report(error));
    const coalesce = knownKeys(o.coalesce, ["fromMembers", "intervalMs"]);
    this.rooms = new Rooms(rollcall, this.subscriber, {
      authorize:
        authorize &&
        ((identity, room) =>
          callHook(
            "authorize",
            () => authorize(identity, room),
            isBoolean,
            "a boolean",
            this.authTimeoutMs,
          )),
      capacity:
        typeof capacity === "function"
          ? (room) => callNow("capacity", () => capacity(room), isCapacity, "a capacity")
          : () => capacity,
      ids: this.ids,
      maxRoomsPerSocket: this.limits.maxRoomsPerSocket,
      heartbeatMs: this.heartbeatMs,
      coalescing: {
        fromMembers: integer("coalesce.fromMembers", coalesce.fromMembers ?? 100, 1, 1_000_000_000),
        intervalMs: integer("coalesce.intervalMs", coalesce.intervalMs ?? 50, 1, 10_000),
      },
      countIntervalMs: integer("countIntervalMs", o.countIntervalMs ?? 1_000, 1, 3_600_000),
      report: (error) => this.report(error),
    });
    const frames = frameSizes(this.limits, rollcall.settings.maxStateBytes);
    this.host = {
      rollcall,
      limits: this.limits,
      frameBytes: frames.frame,
      rooms: this.rooms,
      expiryLeewayMs,
      expiries: this.expiries,
      ended: (session) => void this.end(session),
      reauthenticate: async (token, current) =>
        this.kept(await this.reauthenticate(token, current)),
      report: (error) => this.report(error),
    };
    this.sweeper = ownSweeper(rollcall, o.sweeper, (error) => this.report(error));
    this.wss = new ws.WebSocketServer({
      noServer: true,
      clientTracking: false,
      // A refresh may be the longest frame: any other past `frames.frame` is closed with 1009.
      maxPayload: frames.refresh,
      perMessageDeflate: false,
      // The newest version the client offers, never the token entry a browser offers beside it.
      handleProtocols: (protocols) => SUBPROTOCOLS.find((p) => protocols.has(p)) ?? false,
    });
    this.pinger = setInterval(() => this.ping(), pingMs);
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
        if (!opened) this.admission.release(admitted);
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
    await this.rooms.close();
    if (this.ownsSubscriber) this.subscriber.close();
    await this.sweeper?.stop();
    this.wss.close();
    const server = this.server;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  /** Reports an error to 'error' listeners, or as a process warning: never thrown. */
  report(error: unknown): void {
    reportError(this, error);
  }

  /**
   * What a socket keeps of its identity: the claims only for an `authorize` hook, the only one
   * that reads them (an idle socket should cost little).
   */
  private kept(identity: Identity): Identity {
    if (this.keepClaims || identity.claims === undefined) return identity;
    return { user: identity.user, rooms: identity.rooms, expiresAt: identity.expiresAt };
  }

  private open(ws: WebSocket, admitted: Admitted): void {
    const identity = this.kept(admitted.identity);
    const session = new Session(this.host, ws, identity, admitted.rate);
    this.sessions.set(session, admitted);
    this.rollcall.metrics.add("rollcall.gateway.sockets", 1, {}, true);
    // Listeners shared by every socket, each finding its session on the socket: no closures.
    (ws as Tagged)[SESSION] = session;
    ws.on("pong", onPong);
    ws.on("message", onMessage);
    ws.on("error", onError); // a broken socket closes next; 'close' does the rest
    ws.on("close", onClose);
    session.send({
      type: "welcome",
      user: identity.user,
      connection: session.connection,
      heartbeatMs: this.heartbeatMs,
      expiresAt: identity.expiresAt ?? null,
    });
  }

  private end(session: Session): Promise<void> {
    const admitted = this.sessions.get(session);
    if (!admitted) return Promise.resolve();
    this.sessions.delete(session);
    this.admission.release(admitted);
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
      if (token.length > this.limits.maxTokenBytes) {
        throw new AuthError(401, "invalid-token", `longer than ${this.limits.maxTokenBytes} bytes`);
      }
      const verify = this.verify && (await this.verify);
      const identity = await callHook(
        "authenticate",
        () => (verify ? verify(token) : this.identify(refreshRequest(token, current, this.path))),
        isIdentityOrNull,
        "an identity or null",
        this.authTimeoutMs,
      );
      if (identity === null) throw new AuthError(401, "refused", "refused");
      return checkIdentity(identity, this.ids);
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
    for (const session of this.sessions.keys()) {
      if (!session.alive) {
        session.ws.terminate();
        continue;
      }
      session.alive = false;
      session.ws.ping();
    }
  }
}
