import type { Duplex } from "node:stream";

/**
 * The connections of a gateway's own server that have not sent a request yet. They hold
 * descriptors like open sockets do, so they count against the same cap: when a connection
 * arrives with the cap reached, the one waiting longest makes room (a crowd of silent
 * connections can delay a user, never lock one out). So at most one connection waits past the
 * cap, to be answered (503) when the sockets and handshakes alone fill it. The server's request
 * timeout drops the rest.
 */
export class Lobby {
  /** In order of arrival, each with its 'close' listener (removed once served: a socket held
   * for hours should not keep the lobby's listener). */
  private readonly waiting = new Map<Duplex, () => void>();

  constructor(
    /** Sockets open and handshakes under way. */
    private readonly busy: () => number,
    private readonly cap: number,
    private readonly refused: (reason: "evicted") => void,
  ) {}

  get size(): number {
    return this.waiting.size;
  }

  arrived(socket: Duplex): void {
    const oldest = this.waiting.keys().next();
    if (!oldest.done && this.busy() + this.waiting.size >= this.cap) {
      this.served(oldest.value);
      this.refused("evicted");
      oldest.value.destroy();
    }
    const closed = () => this.waiting.delete(socket);
    this.waiting.set(socket, closed);
    socket.once("close", closed);
  }

  /** The connection's request came: it is a handshake or an answered request now. */
  served(socket: Duplex): void {
    const closed = this.waiting.get(socket);
    if (closed === undefined) return;
    this.waiting.delete(socket);
    socket.removeListener("close", closed);
  }
}
