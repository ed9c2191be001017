import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import type { Rollcall } from "../engine/rollcall.js";
import { checkId } from "../protocol/ids.js";
import type { EventType, PresenceEvent } from "../protocol/events.js";
import { FrameError, SUBPROTOCOL } from "../protocol/frames.js";
import { callback, integer, invalidOption, knownKeys } from "../protocol/options.js";
import type { MemberState } from "../protocol/state.js";
import { reportError } from "../runtime/background.js";
import { Subscriber, type Subscription } from "../runtime/subscriber.js";
import { Sweeper, type SweeperOptions } from "../runtime/sweeper.js";
import {
  AuthError,
  jwtAuthenticator,
  roomAllowed,
  type Authenticate,
  type Identity,
  type JwtOptions,
} from "./auth.js";
import { RoomFeed } from "./feed.js";
import { HeartbeatWheel } from "./heartbeats.js";
import { checkLimits, type Limits } from "./limits.js";
import { CLOSE, Session, type Beat } from "./session.js";

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
  /** The process's Subscriber; by default the gateway makes its own. */
  subscriber?: Subscriber;
  /** Runs a Sweeper while open (true, or its options); false if the process runs its own. Default true. */
  sweeper?: boolean | SweeperOptions;
  /** How often the gateway heartbeats each joined room. Default a third of the presence window. */
  heartbeatMs?: number;
  /** How often each socket is pinged; one that misses a pong by the next is dead. Default 15 000. */
  pingMs?: number;
  limits?: Partial<Limits>;
}

interface GatewayEvents {
  /** Something the host should know: Redis unreachable, a failing hook, … Never thrown. */
  error: [error: Error];
}

interface Room {
  readonly feed: RoomFeed<Session>;
  readonly subscription: Promise<Subscription>;
}

/**
 * Presence over WebSocket (`ws`): authenticates each upgrade, keeps every socket's rooms alive
 * with batched heartbeats, relays the rooms' events and snapshots, and leaves every room of a
 * socket when it closes, cleanly or not. Attach it to your own http.Server, or let it listen.
 */
export class Gateway extends EventEmitter<GatewayEvents> {
  readonly limits: Limits;
  readonly heartbeatMs: number;
  readonly path: string;
  private readonly authenticate: Authenticate;
  private readonly authorize: GatewayOptions["authorize"];
  private readonly capacity: (room: string) => number | undefined;
  private readonly wss: WebSocketServer;
  private readonly sessions = new Set<Session>();
  private readonly rooms = new Map<string, Room>();
  private readonly wheel: HeartbeatWheel<Beat>;
  private readonly subscriber: Subscriber;
  private readonly ownsSubscriber: boolean;
  private readonly sweeper: Sweeper | undefined;
  private readonly pinger: NodeJS.Timeout;
  private readonly closing = new Set<Promise<void>>();
  private server: Server | undefined;
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
      "subscriber",
      "sweeper",
      "heartbeatMs",
      "pingMs",
      "limits",
    ]);
    if ((o.jwt === undefined) === (o.authenticate === undefined)) {
      invalidOption("a gateway needs exactly one of jwt and authenticate");
    }
    this.authenticate = o.jwt
      ? jwtAuthenticator(o.jwt)
      : callback<Authenticate>("authenticate", o.authenticate)!;
    this.authorize = callback("authorize", o.authorize);
    const capacity =
      typeof o.capacity === "number"
        ? integer("capacity", o.capacity, 1, 1_000_000_000)
        : o.capacity;
    this.capacity =
      typeof capacity === "number" || capacity === undefined
        ? () => capacity
        : callback<(room: string) => number | undefined>("capacity", capacity)!;
    this.path = o.path ?? "/presence";
    if (!this.path.startsWith("/")) invalidOption("path must start with /");
    this.limits = checkLimits(o.limits);
    const window = rollcall.settings.presenceWindowMs;
    this.heartbeatMs = integer(
      "heartbeatMs",
      o.heartbeatMs ?? Math.floor(window / 3),
      100,
      window - 1,
    );
    const pingMs = integer("pingMs", o.pingMs ?? 15_000, 100, 3_600_000);

    this.ownsSubscriber = o.subscriber === undefined;
    this.subscriber = o.subscriber ?? new Subscriber(rollcall);
    if (this.ownsSubscriber) this.subscriber.on("error", (error) => this.report(error));
    if (o.sweeper !== false) {
      this.sweeper = new Sweeper(
        rollcall,
        o.sweeper === true || o.sweeper === undefined ? {} : o.sweeper,
      );
      this.sweeper.on("failed", (error) => this.report(error));
      this.sweeper.start();
    }
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: this.limits.maxFrameBytes,
      perMessageDeflate: false,
      handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
    });
    this.wheel = new HeartbeatWheel(this.heartbeatMs, ({ session, room }) => {
      this.beat(session, room).catch((error: unknown) => this.report(error));
    });
    this.wheel.start();
    this.pinger = setInterval(() => this.ping(), pingMs);
    this.pinger.unref();
  }

  /** Sockets open now. */
  get connections(): number {
    return this.sessions.size;
  }

  /** Handles WebSocket upgrades to `path` on your server; other upgrades are left alone. */
  attach(server: Server): this {
    server.on("upgrade", (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (new URL(request.url ?? "/", "http://localhost").pathname === this.path) {
        void this.handleUpgrade(request, socket, head);
      }
    });
    return this;
  }

  /** Listens on a port of its own (0: any free one); plain HTTP requests get 426. */
  async listen(port = 0, host = "127.0.0.1"): Promise<AddressInfo> {
    const server = createServer((_request, response) => {
      response.writeHead(426, { "Content-Type": "text/plain" }).end("WebSocket only\n");
    });
    this.attach(server);
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    return server.address() as AddressInfo;
  }

  /** Authenticates an upgrade and opens the socket, or answers 401/403 before it opens. */
  async handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on("error", () => undefined); // a client gone mid-handshake is no error of ours
    let identity: Identity | null;
    try {
      identity = await this.authenticate(request);
      if (identity === null) throw new AuthError(401, "refused", "refused");
      checkId("user", identity.user);
    } catch (error) {
      if (!(error instanceof AuthError)) this.report(error);
      const refusal =
        error instanceof AuthError ? error : new AuthError(401, "refused", "authentication failed");
      this.rollcall.metrics.add("rollcall.gateway.refusals", 1, { reason: refusal.reason });
      refuse(socket, refusal);
      return;
    }
    if (this.isClosed) return refuse(socket, new AuthError(403, "refused", "closing"), 503);
    this.wss.handleUpgrade(request, socket, head, (ws) => this.open(ws, identity));
  }

  /** Closes every socket (each leaves its rooms), then what the gateway started. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.wheel.stop();
    clearInterval(this.pinger);
    for (const session of this.sessions) session.ws.close(CLOSE.goingAway, "server closing");
    await Promise.all([...this.sessions].map((s) => this.end(s)));
    await Promise.all(this.closing);
    await Promise.all([...this.rooms.values()].map(async (r) => (await r.subscription).close()));
    this.rooms.clear();
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

  /** A socket joins a room, or rejoins it: heartbeat (join), then a snapshot for its replica. */
  async join(
    session: Session,
    room: string,
    state: MemberState | undefined,
    types: EventType[] | undefined,
    ref: string | undefined,
  ): Promise<void> {
    checkId("room", room);
    const isNew = !session.rooms.has(room);
    if (isNew && session.rooms.size >= this.limits.maxRoomsPerSocket) {
      throw new FrameError("TOO_MANY_ROOMS", `at most ${this.limits.maxRoomsPerSocket} rooms`, ref);
    }
    if (isNew && !(await this.allowed(session.identity, room))) {
      throw new FrameError("FORBIDDEN", `not allowed in room ${room}`, ref);
    }
    const entry = this.roomOf(room);
    entry.feed.deliveries.set(session, {
      types: types ? new Set(types) : null,
      last: null,
      broken: false,
    });
    try {
      await entry.subscription;
      const capacity = this.capacity(room);
      const beat = await this.rollcall.heartbeat(room, session.user, session.connection, {
        state,
        ...(capacity === undefined ? {} : { capacity }),
      });
      if (beat.full) throw new FrameError("ROOM_FULL", `room ${room} is full`, ref);
    } catch (error) {
      if (isNew) this.drop(session, room);
      throw error;
    }
    if (isNew) {
      const beat = { session, room };
      session.rooms.set(room, beat);
      this.wheel.add(beat);
    }
    await this.snapshot(session, room, ref);
  }

  /** A socket leaves a room: it stops hearing it, and its connection is removed from it. */
  async leave(session: Session, room: string): Promise<void> {
    if (!this.drop(session, room)) return;
    await this.rollcall.leave(room, session.user, session.connection);
  }

  beat(session: Session, room: string): Promise<unknown> {
    return this.rollcall.heartbeat(room, session.user, session.connection);
  }

  private open(ws: WebSocket, identity: Identity): void {
    const session = new Session(this, ws, identity);
    this.sessions.add(session);
    this.rollcall.metrics.add("rollcall.gateway.sockets", 1, {}, true);
    ws.on("pong", () => (session.alive = true));
    ws.on("message", (data, isBinary) => session.receive(data, isBinary));
    ws.on("error", () => undefined); // a broken socket closes next; 'close' does the rest
    ws.on("close", () => void this.end(session));
    session.send({
      type: "welcome",
      user: identity.user,
      connection: session.connection,
      heartbeatMs: this.heartbeatMs,
    });
  }

  private end(session: Session): Promise<void> {
    if (!this.sessions.delete(session)) return Promise.resolve();
    this.rollcall.metrics.add("rollcall.gateway.sockets", -1, {}, true);
    const ended = session
      .close()
      .catch((error: unknown) => this.report(error))
      .finally(() => this.closing.delete(ended));
    this.closing.add(ended);
    return ended;
  }

  private async snapshot(session: Session, room: string, ref?: string): Promise<void> {
    const roster = await this.rollcall.roster(room);
    const members = roster.members.map(({ user, joinedAt, state }) => ({ user, joinedAt, state }));
    const { epoch, seq, count, typing, log } = roster;
    session.send({
      type: "snapshot",
      room,
      roster: { room, epoch, seq, count, members, typing },
      ...(ref === undefined ? {} : { ref }),
    });
    this.rooms.get(room)?.feed.restart(session, epoch, seq, log);
  }

  private roomOf(room: string): Room {
    let entry = this.rooms.get(room);
    if (!entry) {
      const feed = new RoomFeed<Session>();
      const send = (to: Session, event: PresenceEvent) => to.send({ type: "event", event });
      const subscription = this.subscriber.subscribe(room, (event) => feed.receive(event, send), {
        // Events were lost while the connection was down: the log has them, when it is on;
        // otherwise every socket here gets a new snapshot.
        onResubscribed: () => {
          this.catchUp(room, feed, send).catch((error: unknown) => this.report(error));
        },
      });
      // A failed subscription fails the join that waits for it; the next join tries again.
      subscription.catch(() => this.rooms.get(room) === entry && this.rooms.delete(room));
      entry = { feed, subscription };
      this.rooms.set(room, entry);
    }
    return entry;
  }

  private async catchUp(
    room: string,
    feed: RoomFeed<Session>,
    send: (to: Session, event: PresenceEvent) => void,
  ): Promise<void> {
    const after = feed.log;
    if (this.rollcall.settings.logLength > 0 && after !== undefined) {
      // A gap the log no longer fills reaches the clients as one, and they resync.
      for (const event of await this.rollcall.readLog(room, after)) feed.receive(event, send);
      return;
    }
    await Promise.all([...feed.deliveries.keys()].map((session) => this.snapshot(session, room)));
  }

  /** Forgets a socket's room; the room's subscription goes with its last socket. */
  private drop(session: Session, room: string): boolean {
    const beat = session.rooms.get(room);
    if (beat) this.wheel.remove(beat);
    session.rooms.delete(room);
    const entry = this.rooms.get(room);
    entry?.feed.deliveries.delete(session);
    if (entry && entry.feed.deliveries.size === 0) {
      this.rooms.delete(room);
      entry.subscription.then((s) => s.close()).catch(() => undefined);
    }
    return beat !== undefined;
  }

  private async allowed(identity: Identity, room: string): Promise<boolean> {
    if (identity.rooms !== null && !roomAllowed(identity.rooms, room)) return false;
    if (this.authorize) return await this.authorize(identity, room);
    return identity.rooms !== null;
  }

  private ping(): void {
    for (const session of this.sessions) {
      if (!session.alive) {
        session.ws.terminate();
        continue;
      }
      session.alive = false;
      session.ws.ping();
    }
  }
}

/** Answers a refused upgrade with an HTTP status before any WebSocket exists. */
function refuse(socket: Duplex, error: AuthError, status: number = error.status): void {
  const text =
    status === 401 ? "Unauthorized" : status === 403 ? "Forbidden" : "Service Unavailable";
  const body = `${error.reason}: ${error.message}\n`;
  const challenge =
    status === 401
      ? `WWW-Authenticate: Bearer error="invalid_token", error_description="${error.reason}"\r\n`
      : "";
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\n${challenge}Content-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
