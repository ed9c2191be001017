// A share of the large-rooms bench's sockets (bench/bigRooms.ts), as a process of its own, as
// they would be browsers on many machines: version 2 sockets, each a member joined to its room.
// Every socket counts the frames and bytes it receives; a sampled one also parses them and notes
// when each event arrived, which the bench turns into latencies once it says when it made each
// call. Times are epoch milliseconds (performance.timeOrigin + now), comparable between the
// processes of one machine.
import { encodeIntoCompressedBase64 } from "hdr-histogram-js";
import WebSocket, { type RawData } from "ws";
import { BEARER_PROTOCOL, SUBPROTOCOL_V2, type ServerFrame } from "../src/gateway/index.js";
import { answer } from "../test/kit/child.js";
import { token } from "../test/kit/gatewayChild.js";
import { forEachInFlight } from "./drive.js";
import { histogram } from "./stats.js";

export interface WatchersSettings {
  /** The gateways: socket i connects to `urls[i % urls.length]`. */
  urls: string[];
  /** The share's sockets: socket i is member `m<i>` of room `big-<i % rooms>`. */
  from: number;
  to: number;
  rooms: number;
  /** One socket in `sampledEvery` parses its frames and times its events (picked by a hash of
   * its number, so that the sampled ones spread over every room and gateway). */
  sampledEvery: number;
  /** Sockets opened at once. */
  opening: number;
}

export type WatchersRequest =
  /** Opens the share's sockets; resolves once each has its room's snapshot. */
  | { type: "open" }
  /** Frames and bytes received since the last reset (and in all). */
  | { type: "received" }
  /** Counts and arrivals start over: the measured run begins. */
  | { type: "reset" }
  /** The latencies of the arrivals since the reset, from when each call was due ("type user"
   * → epoch ms): see Timed. */
  | { type: "latencies"; calledAt: Record<string, number> }
  | { type: "close" };

export interface Timed {
  /** µs, as a compressed HDR histogram. */
  histogram: string;
  /** Sampled sockets by room number: each should have timed every event of its room. */
  sampled: number[];
}

export interface Received {
  frames: number;
  bytes: number;
  /** Every byte since the sockets opened, the set-up's too (to tell when all has arrived). */
  total: number;
}

const epochNow = () => performance.timeOrigin + performance.now();

const sockets: WebSocket[] = [];
const sampledPerRoom: number[] = [];
const received: Received = { frames: 0, bytes: 0, total: 0 };
/** Arrival times on the sampled sockets, by "type user". */
let arrivals = new Map<string, number[]>();

const settings = answer<WatchersSettings>(async (request: WatchersRequest) => {
  switch (request.type) {
    case "open": {
      const indices = Array.from(
        { length: settings.to - settings.from },
        (_, k) => settings.from + k,
      );
      await forEachInFlight(indices, settings.opening, open);
      return null;
    }
    case "received":
      return received;
    case "reset":
      received.frames = received.bytes = 0;
      arrivals = new Map();
      return null;
    case "latencies":
      return latencies(request.calledAt);
    case "close":
      for (const ws of sockets) ws.terminate();
      return null;
  }
});

function latencies(calledAt: Record<string, number>): Timed {
  const h = histogram();
  for (const [key, times] of arrivals) {
    const called = calledAt[key];
    if (called === undefined) continue;
    for (const at of times) h.recordValue(Math.max(1, Math.round((at - called) * 1000)));
  }
  const sampled = Array.from({ length: settings.rooms }, (_, r) => sampledPerRoom[r] ?? 0);
  return { histogram: encodeIntoCompressedBase64(h), sampled };
}

/** A hash of the socket's number (its bits mixed): which sockets are sampled owes nothing to
 * rooms or gateways. */
function sampledSocket(i: number): boolean {
  let h = Math.imul(i ^ (i >>> 16), 0x45d9f3b);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return ((h ^ (h >>> 16)) >>> 0) % settings.sampledEvery === 0;
}

function note(key: string, at: number): void {
  const times = arrivals.get(key);
  if (times) times.push(at);
  else arrivals.set(key, [at]);
}

async function open(i: number): Promise<void> {
  const user = `m${i}`;
  const r = i % settings.rooms;
  const room = `big-${r}`;
  const sampled = sampledSocket(i);
  if (sampled) sampledPerRoom[r] = (sampledPerRoom[r] ?? 0) + 1;
  // The load generator spends its CPU on what the gateway sends, not on checking it (a browser
  // would check the UTF-8 of every frame, on a machine of its own).
  const url = settings.urls[i % settings.urls.length]!;
  const ws = new WebSocket(url, [SUBPROTOCOL_V2, BEARER_PROTOCOL + (await token(user))], {
    perMessageDeflate: false,
    skipUTF8Validation: true,
  });
  sockets.push(ws);
  let joined = false;
  await new Promise<void>((resolve, reject) => {
    ws.once("error", reject);
    ws.once("close", (code) =>
      reject(new Error(`${user}'s socket closed (${code}) before its snapshot`)),
    );
    ws.on("message", (data: RawData) => {
      const at = epochNow();
      const buffer = data as Buffer;
      received.frames += 1;
      received.bytes += buffer.length;
      received.total += buffer.length;
      // Only the sampled sockets parse their frames (a large room's snapshot is large).
      const start = buffer.toString("latin1", 0, 20);
      if (start.startsWith('{"type":"welcome"')) ws.send(JSON.stringify({ type: "join", room }));
      else if (start.startsWith('{"type":"snapshot"') && !joined) {
        joined = true;
        resolve();
      } else if (start.startsWith('{"type":"error"')) reject(new Error(buffer.toString()));
      if (!sampled || !joined) return;
      const frame = JSON.parse(buffer.toString("utf8")) as ServerFrame;
      if (frame.type === "event") note(`${frame.event.type} ${frame.event.user}`, at);
      else if (frame.type === "events") {
        for (const e of frame.events) note(`${e.type} ${e.user}`, at);
      }
    });
  });
}
