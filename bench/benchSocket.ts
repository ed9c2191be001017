import WebSocket, { type RawData } from "ws";
import type { PresenceEvent } from "../src/index.js";
import {
  BEARER_PROTOCOL,
  SUBPROTOCOL,
  type ClientFrame,
  type ServerFrame,
} from "../src/gateway/index.js";
import { token } from "../test/kit/gatewayChild.js";
import { forEachInFlight } from "./drive.js";

type Request = Exclude<ClientFrame, { type: "heartbeat" }> | { type: "heartbeat"; ref?: string };

/** A raw `ws` socket speaking the protocol: cheaper than the client, which keeps a replica. */
export class BenchSocket {
  /** Every event frame the socket receives, with its arrival time. */
  onEvent: ((event: PresenceEvent, at: number) => void) | undefined;
  private readonly waiting = new Map<string, [(frame: ServerFrame) => void, (e: Error) => void]>();
  private refs = 0;

  private constructor(
    readonly ws: WebSocket,
    readonly user: string,
  ) {}

  /** Opens a socket as `user`; resolves on the gateway's welcome frame. */
  static async open(url: string, user: string): Promise<BenchSocket> {
    return BenchSocket.withToken(url, await token(user), user);
  }

  /** Opens a socket with a token signed beforehand (the upgrade alone is timed). */
  static withToken(url: string, jwt: string, user = ""): Promise<BenchSocket> {
    const ws = new WebSocket(url, [SUBPROTOCOL, BEARER_PROTOCOL + jwt], {
      perMessageDeflate: false,
    });
    const socket = new BenchSocket(ws, user);
    return new Promise((resolve, reject) => {
      ws.on("error", (error) => {
        reject(error);
        socket.failAll(error);
      });
      ws.once("close", (code) => socket.failAll(new Error(`socket of ${user} closed (${code})`)));
      ws.on("message", (data: RawData) => {
        const at = performance.now();
        const frame = JSON.parse((data as Buffer).toString("utf8")) as ServerFrame;
        if (frame.type === "welcome") resolve(socket);
        else socket.receive(frame, at);
      });
    });
  }

  /** Sends a frame with a fresh ref; resolves with its reply (ack or snapshot), rejects on error. */
  request(frame: Request): Promise<ServerFrame> {
    const ref = (this.refs++).toString(36);
    return new Promise((resolve, reject) => {
      this.waiting.set(ref, [resolve, reject]);
      this.ws.send(JSON.stringify({ ...frame, ref }));
    });
  }

  close(): void {
    this.ws.close();
  }

  private receive(frame: ServerFrame, at: number): void {
    if (frame.type === "event") {
      this.onEvent?.(frame.event, at);
      return;
    }
    const ref = "ref" in frame ? frame.ref : undefined;
    const waiter = ref === undefined ? undefined : this.waiting.get(ref);
    if (!waiter) {
      if (frame.type === "error") this.failAll(new Error(`${frame.code}: ${frame.message}`));
      return;
    }
    this.waiting.delete(ref!);
    if (frame.type === "error") waiter[1](new Error(`${frame.code}: ${frame.message}`));
    else waiter[0](frame);
  }

  private failAll(error: Error): void {
    for (const [, reject] of this.waiting.values()) reject(error);
    this.waiting.clear();
  }
}

/** Opens one socket per user, `inFlight` handshakes at a time. */
export async function openAll(
  url: string,
  users: readonly string[],
  inFlight: number,
): Promise<BenchSocket[]> {
  const sockets: BenchSocket[] = [];
  await forEachInFlight(users, inFlight, async (user) => {
    sockets.push(await BenchSocket.open(url, user));
  });
  return sockets;
}

/**
 * Rooms across two gateways: in each, a watcher on `b` (every event it hears goes to `heard`, as
 * "type room user") and a resident on `a`, both joined; then `pool` newcomers on `a`, to send
 * the frames whose events are timed.
 */
export async function acrossGateways(
  a: string,
  b: string,
  rooms: readonly string[],
  pool: number,
  heard: (key: string, at: number) => void,
): Promise<{ watchers: BenchSocket[]; residents: BenchSocket[]; senders: BenchSocket[] }> {
  const watchers = await openAll(
    b,
    rooms.map((_, i) => `watcher-${i}`),
    16,
  );
  await Promise.all(
    watchers.map((w, i) => {
      w.onEvent = (event, at) => heard(`${event.type} ${event.room} ${event.user}`, at);
      return w.request({ type: "join", room: rooms[i]! });
    }),
  );
  const residents = await openAll(
    a,
    rooms.map((_, i) => `resident-${i}`),
    16,
  );
  await Promise.all(residents.map((r, i) => r.request({ type: "join", room: rooms[i]! })));
  const senders = await openAll(
    a,
    Array.from({ length: pool }, (_, i) => `newcomer-${i}`),
    pool,
  );
  return { watchers, residents, senders };
}
