import { connect, createServer, type Socket } from "node:net";

export interface Proxy {
  readonly port: number;
  /** redis://127.0.0.1:port, for a client that should go through the proxy. */
  readonly url: string;
  /** Client connections open right now. */
  connections(): number;
  /** Destroys every client connection and its upstream; new connections are still accepted. */
  dropConnections(): void;
  /** Stops forwarding in both directions (nothing is lost: the sockets just stop reading). */
  pause(): void;
  /** Bytes received from clients and not forwarded yet (held while paused). */
  held(): number;
  resume(): void;
  /**
   * Forwards the next request chunk that `match` accepts, swallows the server's reply to it and
   * closes that connection: the command ran, but its client never hears back. Resolves once the
   * connection is torn down (also if that happens for another reason before a reply arrives).
   */
  dropNextReply(match: (request: Buffer) => boolean): Promise<void>;
  close(): Promise<void>;
}

interface Trap {
  match: (request: Buffer) => boolean;
  fired: () => void;
  failed: (error: unknown) => void;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  /** Set once a trap caught one of this connection's requests. */
  doomed?: Trap;
}

/** A matcher for EVAL / EVALSHA (and their _RO forms) requests that contain `substring`. */
export function isEvalOf(substring: string): (request: Buffer) => boolean {
  return (request) => {
    const text = request.toString("latin1");
    return /\r\nEVAL(SHA)?(_RO)?\r\n/i.test(text) && text.includes(substring);
  };
}

/** A TCP proxy on 127.0.0.1 in front of a Redis server, to cut connections at chosen moments. */
export async function startProxy(target: { host: string; port: number }): Promise<Proxy> {
  const pairs = new Set<Pair>();
  const traps: Trap[] = [];
  let paused = false;

  const server = createServer((client) => {
    const pair: Pair = { client, upstream: connect(target.port, target.host) };
    pairs.add(pair);
    wire(pair, traps, () => pairs.delete(pair));
    if (paused) [client, pair.upstream].forEach((s) => s.pause());
  });
  server.on("error", () => undefined); // only listen() can fail, and its promise reports it
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");

  const everySocket = () => [...pairs].flatMap((p) => [p.client, p.upstream]);
  return {
    port: address.port,
    url: `redis://127.0.0.1:${address.port}`,
    connections: () => pairs.size,
    dropConnections: () => everySocket().forEach((s) => s.destroy()),
    pause: () => ((paused = true), everySocket().forEach((s) => s.pause())),
    held: () => [...pairs].reduce((sum, p) => sum + p.client.readableLength, 0),
    resume: () => ((paused = false), everySocket().forEach((s) => s.resume())),
    dropNextReply: (match) => {
      const fired = new Promise<void>((resolve, reject) =>
        traps.push({ match, fired: resolve, failed: reject }),
      );
      fired.catch(() => undefined); // a caller that never awaits it must not see an unhandled rejection
      return fired;
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      everySocket().forEach((s) => s.destroy());
      traps.splice(0).forEach((t) => t.failed(new Error("the proxy closed before the trap fired")));
      await closed;
    },
  };
}

/** Forwards both ways; either side closing or failing tears the other down. */
function wire(pair: Pair, traps: Trap[], forget: () => void) {
  const { client, upstream } = pair;
  client.on("data", (chunk: Buffer) => {
    const trap = pair.doomed ? undefined : takeTrap(traps, chunk);
    if (trap) pair.doomed = trap;
    upstream.write(chunk);
  });
  // Assumes the doomed request was sent on its own: any reply bytes after it are taken as its reply.
  upstream.on("data", (chunk: Buffer) => {
    if (pair.doomed) upstream.destroy();
    else client.write(chunk);
  });
  for (const [socket, other] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    socket.on("error", () => undefined); // the close that follows does the cleanup
    socket.on("close", () => {
      other.destroy();
      forget();
      pair.doomed?.fired();
    });
  }
}

/** Removes and returns the first armed trap that matches a request; a matcher that throws fails its trap. */
function takeTrap(traps: Trap[], request: Buffer): Trap | undefined {
  for (const trap of [...traps]) {
    try {
      if (!trap.match(request)) continue;
      traps.splice(traps.indexOf(trap), 1);
      return trap;
    } catch (error) {
      traps.splice(traps.indexOf(trap), 1);
      trap.failed(error);
    }
  }
  return undefined;
}
