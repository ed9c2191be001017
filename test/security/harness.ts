// The security suite's tools: a gateway process (test/security/server.ts), raw HTTP upgrades over
// net sockets, protocol clients over `ws`, and what Redis holds, to show an attack wrote nothing.
import { spawn, type ChildProcess } from "node:child_process";
import { connect, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { BEARER_PROTOCOL, SUBPROTOCOL, type ServerFrame } from "../../src/gateway/index.js";
import { client, redisUrl } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";
import { SECRET, token } from "../kit/gateway.js";
import { expect } from "chai";
import type { FromServer, ServerConfig, ServerStats, ToServer } from "./server.js";

const SERVER = fileURLToPath(new URL("./server.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

export interface GatewayProcess {
  readonly port: number;
  readonly url: string;
  /** Everything the process wrote to stdout and stderr. */
  output(): string;
  stats(): Promise<ServerStats>;
  /** With fakeClock: moves the process's Date and interval timers on by `ms` at once. */
  advance(ms: number): Promise<void>;
  /** With holdHook: lets the hook answer, now and from now on. */
  release(): void;
  stop(): Promise<void>;
}

const running = new Set<GatewayProcess>();

/** Every token the suite sends: none may ever show in a gateway's output (stopProcesses). */
export const sentTokens: string[] = [];

/** A signed HS256 token for a user (see test/kit/gateway.ts), remembered as sent. */
export async function tokenOf(
  user: string,
  claims: Record<string, unknown> = {},
  expires: string | number = "1h",
): Promise<string> {
  const jwt = await token(user, claims, expires);
  sentTokens.push(jwt);
  return jwt;
}

/** Runs an attack and checks that Redis holds and ran nothing new because of it. */
export async function writesNothing(attack: () => Promise<void>): Promise<void> {
  const before = await redisWrites();
  await attack();
  expect(await redisWrites()).to.deep.equal(before);
}

/** Starts a gateway process; `descriptors` lowers its open-file limit (ulimit -n). */
export async function startProcess(
  config: Partial<ServerConfig> = {},
  descriptors?: number,
): Promise<GatewayProcess> {
  const full: ServerConfig = { redisUrl: redisUrl(), mode: "jwt", secret: SECRET, ...config };
  const node = `exec "${process.execPath}" --import tsx "${SERVER}"`;
  const child: ChildProcess = spawn(
    "/bin/sh",
    ["-c", descriptors ? `ulimit -n ${descriptors} && ${node}` : node],
    {
      cwd: ROOT,
      env: { ...process.env, SECURITY_GATEWAY: JSON.stringify(full) },
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    },
  );
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const waiting = new Map<number, (message: FromServer) => void>();
  let next = 0;
  const port = await new Promise<number>((resolve, reject) => {
    void exited.then(() => reject(new Error(`the gateway process exited: ${output}`)));
    child.on("message", (message: FromServer) => {
      if (message.type === "listening") resolve(message.port);
      else {
        waiting.get(message.id)?.(message);
        waiting.delete(message.id);
      }
    });
  });
  /** Sends a request; resolves with the process's answer to it, rejects if the process died. */
  const ask = (request: ToServer & { id: number }) =>
    new Promise<FromServer>((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        return reject(new Error(`the gateway process is gone: ${output}`));
      }
      waiting.set(request.id, resolve);
      void exited.then(() => reject(new Error(`the gateway process died: ${output}`)));
      child.send(request);
    });
  const gateway: GatewayProcess = {
    port,
    url: `ws://127.0.0.1:${port}/presence`,
    output: () => output,
    stats: async () => {
      const answer = await ask({ type: "stats", id: next++ });
      if (answer.type !== "stats") throw new Error(`not stats: ${answer.type}`);
      return answer.stats;
    },
    advance: async (ms) => void (await ask({ type: "advance", id: next++, ms })),
    release: () => void child.send({ type: "release" } satisfies ToServer),
    async stop() {
      running.delete(gateway);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
  running.add(gateway);
  return gateway;
}

/** Stops every process started, after checking none printed or reported a token it was sent. */
export async function stopProcesses(tokens: readonly string[]): Promise<void> {
  const processes = [...running];
  try {
    for (const gateway of processes) {
      const { errors } = await gateway.stats();
      const text = gateway.output() + errors.join("\n");
      for (const token of tokens) {
        if (text.includes(token)) throw new Error(`a token shows in the gateway's output: ${text}`);
      }
    }
  } finally {
    await Promise.all(processes.map((g) => g.stop()));
  }
}

/** Waits until an asynchronous condition holds, failing after a while. */
export async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
  }
}

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Resolves when the server has closed the connection. */
  closed: Promise<void>;
  socket: Socket;
}

/** A raw upgrade request over a net socket: what the server answers, and whether it hangs up. */
export function rawUpgrade(
  port: number,
  options: { path?: string; headers?: Record<string, string>; method?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {
    Host: `127.0.0.1:${port}`,
    Connection: "Upgrade",
    Upgrade: "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Protocol": SUBPROTOCOL,
    ...options.headers,
  };
  for (const [name, value] of Object.entries(headers)) if (value === "") delete headers[name];
  const request =
    `${options.method ?? "GET"} ${options.path ?? "/presence"} HTTP/1.1\r\n` +
    Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("") +
    "\r\n";
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let data = "";
    let answered = false;
    const closed = new Promise<void>((done) => {
      socket.once("close", () => done());
      socket.once("end", () => done());
    });
    socket.on("error", () => undefined);
    socket.once("connect", () => socket.write(request));
    socket.on("data", (chunk: Buffer) => {
      data += chunk.toString("latin1");
      const end = data.indexOf("\r\n\r\n");
      if (answered || end < 0) return;
      const [statusLine, ...lines] = data.slice(0, end).split("\r\n");
      const parsed = Object.fromEntries(
        lines.map((l) => [
          l.slice(0, l.indexOf(":")).toLowerCase(),
          l.slice(l.indexOf(":") + 1).trim(),
        ]),
      );
      const length = Number(parsed["content-length"] ?? 0);
      if (data.length < end + 4 + length) return;
      answered = true;
      resolve({
        status: Number(statusLine!.split(" ")[1]),
        headers: parsed,
        body: data.slice(end + 4, end + 4 + length),
        closed,
        socket,
      });
    });
    void closed.then(() => {
      if (!answered) reject(new Error(`closed without an answer: ${JSON.stringify(data)}`));
    });
  });
}

/** A protocol client over `ws`: every frame it gets, its close code. */
export interface Peer {
  ws: WebSocket;
  frames: ServerFrame[];
  closed: () => number | undefined;
  send: (frame: unknown) => void;
  /** Waits for the first frame of a type (and ref) from now on, or already received. */
  next: (type: string, ref?: string) => Promise<ServerFrame>;
}

export function openPeer(
  url: string,
  token: string | undefined,
  options: { headers?: Record<string, string>; via?: "protocol" | "query" | "header" } = {},
): Promise<Peer> {
  const via = options.via ?? "protocol";
  const protocols = [SUBPROTOCOL];
  const headers = { ...options.headers };
  let target = url;
  if (token !== undefined && via === "protocol") protocols.push(BEARER_PROTOCOL + token);
  if (token !== undefined && via === "query") target += `?token=${encodeURIComponent(token)}`;
  if (token !== undefined && via === "header") headers.Authorization = `Bearer ${token}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(target, protocols, { headers });
    const frames: ServerFrame[] = [];
    let code: number | undefined;
    ws.on("message", (data: Buffer) => frames.push(JSON.parse(data.toString()) as ServerFrame));
    ws.on("close", (c) => (code = c));
    ws.once("unexpected-response", (_request, response) =>
      reject(new Error(`refused: ${response.statusCode}`)),
    );
    ws.once("error", reject);
    ws.once("open", () => {
      const peer: Peer = {
        ws,
        frames,
        closed: () => code,
        send: (frame) => ws.send(typeof frame === "string" ? frame : JSON.stringify(frame)),
        next: async (type, ref) => {
          const match = (f: ServerFrame) =>
            f.type === type && (ref === undefined || ("ref" in f && f.ref === ref));
          await eventually(() => frames.some(match) || code !== undefined, 10_000);
          const found = frames.find(match);
          if (!found) throw new Error(`closed (${code}) before a ${type} frame`);
          return found;
        },
      };
      resolve(peer);
    });
  });
}

/** What Redis holds, and how many scripts it ran: an attack that wrote nothing leaves both. */
export async function redisWrites(): Promise<{ keys: string[]; scripts: number }> {
  const admin = client();
  const keys = (await admin.keys("*")).sort();
  const stats = String(await admin.info("commandstats"));
  const scripts = [...stats.matchAll(/cmdstat_(?:evalsha|eval|fcall)[^:]*:calls=(\d+)/g)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
  admin.disconnect();
  return { keys, scripts };
}

/** What a raw connection got: every byte, and whether the server hung up. */
export interface RawExchange {
  /** Resolves with everything the server sent, once it closed the connection (or `ms` passed). */
  readonly done: Promise<{ data: string; closed: boolean }>;
  readonly socket: Socket;
}

/**
 * Writes bytes (at once, or in pieces) over a new connection and keeps what comes back; after the
 * last piece it may end its side (`end`) or stay silent. `ms` bounds the wait for the server.
 */
export function rawExchange(
  port: number,
  pieces: readonly (string | Buffer)[],
  options: { end?: boolean; ms?: number } = {},
): RawExchange {
  const socket = connect(port, "127.0.0.1");
  const chunks: Buffer[] = [];
  socket.on("error", () => undefined);
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  socket.once("connect", () => {
    for (const piece of pieces) socket.write(piece);
    if (options.end) socket.end();
  });
  const done = new Promise<{ data: string; closed: boolean }>((resolve) => {
    const timer = setTimeout(() => finish(false), options.ms ?? 10_000);
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      resolve({ data: Buffer.concat(chunks).toString("latin1"), closed });
    };
    socket.once("close", () => finish(true));
  });
  return { done, socket };
}

/**
 * A WebSocket client that speaks the frames itself over a net socket and, unlike a well-behaved
 * one, ignores the server's close frame: it goes on sending whatever it is told to.
 */
export interface StubbornPeer {
  frames: ServerFrame[];
  /** The close code the server sent, if it did. */
  closeCode(): number | undefined;
  /** Whether the TCP connection is gone. */
  gone(): boolean;
  send(frame: unknown): void;
  destroy(): void;
}

export function openStubbornPeer(port: number, jwt: string): Promise<StubbornPeer> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  const reader = new ServerFrameReader();
  const { frames } = reader;
  let gone = false;
  let buffer = Buffer.alloc(0);
  let upgraded = false;
  socket.once("close", () => (gone = true));
  return new Promise((resolve, reject) => {
    socket.once("connect", () =>
      socket.write(
        `GET /presence HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\n` +
          `Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
          `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
          `Sec-WebSocket-Protocol: ${SUBPROTOCOL}, ${BEARER_PROTOCOL}${jwt}\r\n\r\n`,
      ),
    );
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!upgraded) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const status = buffer.subarray(0, end).toString("latin1").split(" ")[1];
        if (status !== "101") return reject(new Error(`refused: ${status}`));
        upgraded = true;
        buffer = buffer.subarray(end + 4);
        resolve(peer);
      }
      reader.read(buffer);
      buffer = Buffer.alloc(0);
    });
    const peer: StubbornPeer = {
      frames,
      closeCode: () => reader.code,
      gone: () => gone,
      send: (frame) => socket.write(maskedFrame(JSON.stringify(frame))),
      destroy: () => socket.destroy(),
    };
  });
}

/** A client's text frame, masked as RFC 6455 wants of a client (payloads under 64 KiB). */
export function maskedFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  const header =
    payload.length < 126
      ? Buffer.from([0x81, 0x80 | payload.length])
      : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  const masked = payload.map((byte, i) => byte ^ mask[i % 4]!);
  return Buffer.concat([header, mask, masked]);
}

/** Reads a server's frames (unmasked; these tests only meet ones under 64 KiB) as they come. */
export class ServerFrameReader {
  readonly frames: ServerFrame[] = [];
  /** The code of the server's close frame, once it came. */
  code: number | undefined;
  private buffer = Buffer.alloc(0);

  read(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    while (this.buffer.length >= 2) {
      const opcode = this.buffer[0]! & 0x0f;
      let length = this.buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) return;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      }
      if (this.buffer.length < offset + length) return;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      if (opcode === 0x1) this.frames.push(JSON.parse(payload.toString()) as ServerFrame);
      if (opcode === 0x8) this.code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
    }
  }
}
