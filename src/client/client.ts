import { backoff } from "../protocol/backoff.js";
import type { EventType } from "../protocol/events.js";
import {
  BEARER_PROTOCOL,
  parseServerFrame,
  SUBPROTOCOL,
  SUBPROTOCOL_V2,
  type ClientFrame,
  type ServerFrame,
} from "../protocol/frames.js";
import type { MemberState } from "../protocol/state.js";
import { RoomCount } from "./count.js";
import { Emitter } from "./emitter.js";
import { GatewayError, type Link } from "./link.js";
import { Room } from "./room.js";
import { UserList } from "./users.js";

export { GatewayError } from "./link.js";

export interface ClientOptions {
  /**
   * The token sent with each (re)connection, or a function that gets a fresh one each time: then
   * the client also asks it for one ahead of the token's expiry and refreshes the socket with it.
   */
  token?: string | (() => string | Promise<string>);
  /** Ask for a fresh token this long before the socket's expires (at most half its life). Default 30 000. */
  refreshAheadMs?: number;
  /**
   * Send the token as `?token=` in the URL, as gateways before `rollcall.bearer.` did. Default
   * false: it goes as a subprotocol entry, out of the URL (and of access logs).
   */
  tokenInUrl?: boolean;
  /** First and longest pause before reconnecting (doubling, with jitter). Defaults 500 and 15 000 ms. */
  reconnectMs?: { first?: number; max?: number };
  /** At most one `typing` frame per room this often. Default 2 000 ms. */
  typingIntervalMs?: number;
  /** A WebSocket implementation, where there is no global one. */
  WebSocket?: typeof WebSocket;
}

export type Status = "connecting" | "open" | "reconnecting" | "closed";

/** The close code of a socket whose token expired (the gateway's CLOSE.tokenExpired). */
const TOKEN_EXPIRED = 4001;

interface ClientEvents extends Record<string, unknown[]> {
  status: [status: Status];
  /** An error frame that answered no request of yours (e.g. RATE_LIMITED), or a bad frame. */
  error: [error: GatewayError];
}

interface Pending {
  /** Gets the reply frame (an ask's), before any later frame is handled. */
  answered?: (reply: ServerFrame) => void;
  resolve: () => void;
  reject: (error: GatewayError) => void;
}

/**
 * The browser side of the gateway: one WebSocket, any number of rooms, each a live roster replica
 * (snapshot on join and on every reconnect, then events, resynced on any gap). Reconnects with
 * backoff and jitter, and rejoins its rooms. ESM with no Node built-ins: works unbundled in a page.
 */
export class RollcallClient extends Emitter<ClientEvents> {
  /** Who the gateway says this client is (its token's user), once connected. */
  user: string | null = null;
  private ws: WebSocket | null = null;
  private currentStatus: Status = "connecting";
  private readonly rooms = new Map<string, Room>();
  private readonly counts = new Map<string, RoomCount>();
  /** The users followed (one list at a time). */
  private userList: UserList | undefined;
  private readonly pending = new Map<string, Pending>();
  private refs = 0;
  private failures = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly WebSocketImpl: typeof WebSocket;
  /** What its rooms and count watches call. */
  private readonly link: Link;

  constructor(
    readonly url: string,
    private readonly options: ClientOptions = {},
  ) {
    super();
    const impl = options.WebSocket ?? globalThis.WebSocket;
    if (!impl) throw new TypeError("no WebSocket implementation: pass options.WebSocket");
    this.WebSocketImpl = impl;
    this.link = {
      send: (frame, expectReply) => this.send(frame, expectReply),
      ask: (frame, answered) => this.send(frame, answered),
      forget: (room) => void this.rooms.delete(room),
      forgetCount: (room) => void this.counts.delete(room),
      forgetUsers: (list) => {
        if (this.userList !== list) return false;
        this.userList = undefined;
        return true;
      },
      typingIntervalMs: options.typingIntervalMs ?? 2_000,
    };
    void this.connect();
  }

  get status(): Status {
    return this.currentStatus;
  }

  /**
   * Joins a room; resolves with its live roster once the first snapshot has arrived. The options
   * count at the first join of the room (a room joined already is given as it is). `invisible`:
   * in the room unseen, in no roster, count, event or status of others (your own roster does not
   * hold you either); `typing()` sends nothing there, and `setState()` is refused (FORBIDDEN).
   */
  join(
    room: string,
    options: { state?: MemberState; types?: EventType[]; invisible?: boolean } = {},
  ): Promise<Room> {
    let joined = this.rooms.get(room);
    if (!joined) {
      const { state = null, types, invisible = false } = options;
      joined = new Room(this.link, room, state, types, invisible);
      this.rooms.set(room, joined);
      if (this.currentStatus === "open") joined.rejoin();
    }
    const handle = joined;
    return handle.ready.then(() => handle);
  }

  /**
   * Watches a room's member count without joining it; resolves once the first count has come.
   * Needs a gateway that speaks protocol version 2 (an older one refuses it: UNKNOWN_FRAME).
   */
  watch(room: string): Promise<RoomCount> {
    if (this.currentStatus === "closed") {
      return Promise.reject(new GatewayError("CLOSED", "the client was closed"));
    }
    let watched = this.counts.get(room);
    if (!watched) {
      watched = new RoomCount(this.link, room);
      this.counts.set(room, watched);
      if (this.currentStatus === "open") watched.rewatch();
    }
    const handle = watched;
    return handle.ready.then(() => handle);
  }

  /**
   * Follows users' online status (a contact list; protocol version 2): resolves once the gateway
   * has answered with every user's status, and the list then tells each change. The gateway's
   * `authorizeUsers` hook decides whom the user may follow: the others are the list's `denied`,
   * and with none allowed the call fails (FORBIDDEN). Followed again after a reconnect, the
   * changes missed meanwhile told as changes. One list per client: a later call replaces it (it
   * hears nothing more, and a first answer it still awaited fails with CLOSED).
   */
  followUsers(users: readonly string[]): Promise<UserList> {
    if (this.currentStatus === "closed") {
      return Promise.reject(new GatewayError("CLOSED", "the client was closed"));
    }
    const list = new UserList(this.link, users);
    this.userList?.end(new GatewayError("CLOSED", "replaced by a later followUsers"));
    this.userList = list;
    if (this.currentStatus === "open") list.refollow();
    return list.ready.then(() => list);
  }

  /** Closes the socket for good: the gateway leaves every room. */
  close(): void {
    this.setStatus("closed");
    clearTimeout(this.timer);
    clearTimeout(this.refreshTimer);
    this.ws?.close(1000);
    for (const room of this.rooms.values()) room.end();
    this.rooms.clear();
    const closed = new GatewayError("CLOSED", "the client was closed");
    // No reconnect will watch them again: a count still awaited fails now.
    for (const watched of this.counts.values()) watched.end(closed);
    this.counts.clear();
    this.userList?.end(closed);
    this.userList = undefined;
    this.settleAll(closed);
  }

  /**
   * Sends a frame; with `expectReply`, resolves on its ack or snapshot, rejects on its error (a
   * function gets the reply frame first).
   */
  private send(
    frame: ClientFrame,
    expectReply: boolean | ((reply: ServerFrame) => void) = false,
  ): Promise<void> {
    if (this.currentStatus !== "open" || !this.ws) {
      return Promise.reject(new GatewayError("CLOSED", "not connected"));
    }
    if (!expectReply) {
      this.ws.send(JSON.stringify(frame));
      return Promise.resolve();
    }
    const ref = `r${++this.refs}`;
    this.ws.send(JSON.stringify({ ...frame, ref }));
    const answered = typeof expectReply === "function" ? expectReply : undefined;
    return new Promise((resolve, reject) => this.pending.set(ref, { answered, resolve, reject }));
  }

  private async token(): Promise<string | undefined> {
    const { token } = this.options;
    return typeof token === "function" ? await token() : token;
  }

  private async connect(): Promise<void> {
    let url = this.url;
    // Version 2 first: a gateway that serves only version 1 picks that.
    const protocols = [SUBPROTOCOL_V2, SUBPROTOCOL];
    try {
      const token = await this.token();
      if (token && this.options.tokenInUrl) {
        url += `${url.includes("?") ? "&" : "?"}token=${encodeURIComponent(token)}`;
      } else if (token) protocols.push(BEARER_PROTOCOL + token);
    } catch (error) {
      this.emit("error", new GatewayError("CLOSED", `no token: ${String(error)}`));
      return this.retry();
    }
    if (this.currentStatus === "closed") return;
    const ws = new this.WebSocketImpl(url, protocols);
    this.ws = ws;
    ws.onmessage = (message: MessageEvent) => this.receive(String(message.data));
    // Node's `ws` throws an 'error' nobody listens to; the close that follows retries.
    ws.onerror = () => undefined;
    ws.onclose = (event: { code: number }) => {
      if (this.ws !== ws) return;
      this.ws = null;
      clearTimeout(this.refreshTimer);
      this.settleAll(new GatewayError("CLOSED", "the connection closed"));
      for (const room of this.rooms.values()) room.lost();
      // The token expired: a fresh one gets in at once, no backoff.
      if (event.code === TOKEN_EXPIRED && this.currentStatus === "open") this.retry(0);
      else if (this.currentStatus !== "closed") this.retry();
    };
  }

  private retry(delayMs?: number): void {
    if (this.currentStatus === "closed") return;
    this.setStatus("reconnecting");
    this.failures += 1;
    const { first = 500, max = 15_000 } = this.options.reconnectMs ?? {};
    this.timer = setTimeout(
      () => void this.connect(),
      delayMs ?? backoff(this.failures, { firstMs: first, maxMs: max, jitter: true }),
    );
  }

  /** Asks the token function for a fresh token ahead of `expiresAt`, and refreshes with it. */
  private scheduleRefresh(expiresAt: number | null): void {
    clearTimeout(this.refreshTimer);
    if (expiresAt === null || typeof this.options.token !== "function") return;
    const left = expiresAt - Date.now();
    const ahead = Math.min(this.options.refreshAheadMs ?? 30_000, left / 2);
    this.refreshTimer = setTimeout(() => void this.refresh(), Math.max(0, left - ahead));
  }

  private async refresh(): Promise<void> {
    try {
      const token = await this.token();
      if (!token) return;
      await this.send({ type: "refresh", token }, true);
    } catch (error) {
      // The socket will close with 4001 at the expiry, and reconnect at once with a fresh token.
      if (error instanceof GatewayError && error.code === "CLOSED") return;
      this.emit(
        "error",
        error instanceof GatewayError ? error : new GatewayError("INVALID_TOKEN", String(error)),
      );
    }
  }

  private receive(text: string): void {
    let frame: ServerFrame;
    try {
      frame = parseServerFrame(text);
    } catch (error) {
      this.emit("error", new GatewayError("BAD_FRAME", `unreadable frame: ${String(error)}`));
      return;
    }
    switch (frame.type) {
      case "welcome":
        this.user = frame.user;
        this.failures = 0;
        this.setStatus("open");
        this.scheduleRefresh(frame.expiresAt);
        for (const room of this.rooms.values()) room.rejoin();
        for (const watched of this.counts.values()) watched.rewatch();
        this.userList?.refollow();
        return;
      case "refreshed":
        if (frame.ref) this.settle(frame.ref);
        this.scheduleRefresh(frame.expiresAt);
        return;
      case "snapshot":
        this.rooms.get(frame.room)?.install(frame.roster);
        if (frame.ref) this.settle(frame.ref);
        return;
      case "event":
        this.rooms.get(frame.event.room)?.receive(frame.event);
        return;
      case "events": {
        const room = this.rooms.get(frame.room);
        for (const event of frame.events) room?.receive(event);
        return;
      }
      case "count":
        this.counts.get(frame.room)?.receive(frame.count);
        if (frame.ref) this.settle(frame.ref);
        return;
      case "users":
        if (frame.ref) this.settle(frame.ref, undefined, frame);
        else this.userList?.receive(frame.statuses);
        return;
      case "ack":
        this.settle(frame.ref);
        return;
      case "error": {
        const error = new GatewayError(frame.code, frame.message);
        if (frame.ref && this.pending.has(frame.ref)) this.settle(frame.ref, error);
        else if (frame.room !== undefined && this.rooms.has(frame.room)) {
          this.rooms.get(frame.room)!.refused(error); // left after a refresh
        } else if (frame.room !== undefined && this.counts.has(frame.room)) {
          this.counts.get(frame.room)!.refused(error);
        } else this.emit("error", error);
      }
    }
  }

  private settle(ref: string, error?: GatewayError, reply?: ServerFrame): void {
    const pending = this.pending.get(ref);
    this.pending.delete(ref);
    if (error) return pending?.reject(error);
    if (reply) pending?.answered?.(reply);
    pending?.resolve();
  }

  private settleAll(error: GatewayError): void {
    for (const ref of [...this.pending.keys()]) this.settle(ref, error);
  }

  private setStatus(status: Status): void {
    if (this.currentStatus === status) return;
    this.currentStatus = status;
    this.emit("status", status);
  }
}
