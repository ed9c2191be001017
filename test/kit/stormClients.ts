// A share of a reconnect storm's clients (test/kit/storm.ts), as a process of its own: browser
// clients (RollcallClient, each a user with its room's replica) for the sockets `from` to `to`,
// socket i in room floor(i / roomSize), sent to gateway A when i is even and A is up, else B (what
// a load balancer does). Times are epoch milliseconds (performance.timeOrigin + now), comparable
// between the processes of one machine.
import WebSocket from "ws";
import { RollcallClient, type Room } from "../../src/client/index.js";
import { answer } from "./child.js";
import { token } from "./gatewayChild.js";
import { roomOf, sizeOf } from "./stormRooms.js";

export interface StormClientsSettings {
  from: number;
  to: number;
  /** Every socket of the storm, and the members of a room. */
  total: number;
  roomSize: number;
  a: string;
  b: string;
}

export type StormClientsRequest =
  /** Opens the share's sockets, `opening` at a time, each joining its room. */
  | { type: "open"; opening: number }
  /** A is about to be killed: every socket opened from now on goes to B. */
  | { type: "route-to-b" }
  | { type: "poll" }
  /** When each socket of A opened again on B (epoch ms). */
  | { type: "back-times" }
  /** Each room's replicas, as the distinct lists of their users (sorted, joined by commas). */
  | { type: "replicas" };

export interface StormClientsPoll {
  /** Every replica synced and as large as its room. */
  converged: boolean;
  /** Sockets of A open again (on B), and when the last of them opened (epoch ms). */
  back: number;
  lastBackAt: number;
  errors: number;
  firstError: string | null;
}

const epochNow = () => performance.timeOrigin + performance.now();

const clients: RollcallClient[] = [];
const joined: Room[] = [];
let routedToB = false;
let errors = 0;
let firstError: string | null = null;
const backAt = new Map<RollcallClient, number>();

const settings = answer<StormClientsSettings>(async (request: StormClientsRequest) => {
  switch (request.type) {
    case "open":
      return open(request.opening);
    case "route-to-b":
      routedToB = true;
      return null;
    case "poll":
      return poll();
    case "back-times":
      return [...backAt.values()];
    case "replicas":
      return replicas();
  }
});

async function open(opening: number): Promise<null> {
  const { from, to, roomSize, a, b } = settings;
  class Routed extends WebSocket {
    constructor(url: string, protocols: string[]) {
      const i = Number(new URL(url).pathname.slice(1));
      super(i % 2 === 0 && !routedToB ? a : b, protocols, { perMessageDeflate: false });
    }
  }
  for (let start = from; start < to; start += opening) {
    const ready: Promise<Room>[] = [];
    for (let i = start; i < Math.min(to, start + opening); i++) {
      const user = `s${i}`;
      const client = new RollcallClient(`ws://storm/${i}`, {
        token: () => token(user),
        WebSocket: Routed as unknown as typeof globalThis.WebSocket,
      });
      client.on("error", (error) => {
        errors += 1;
        firstError ??= `client: ${error.message}`;
      });
      if (i % 2 === 0) {
        client.on("status", (status) => {
          if (status === "open" && routedToB) backAt.set(client, epochNow());
        });
      }
      clients.push(client);
      ready.push(client.join(roomOf(i, roomSize)));
    }
    joined.push(...(await Promise.all(ready)));
  }
  return null;
}

function poll(): StormClientsPoll {
  const { total, roomSize } = settings;
  return {
    converged: joined.every(
      (room) => room.synced && room.roster.members.length === sizeOf(room.room, total, roomSize),
    ),
    back: backAt.size,
    lastBackAt: Math.max(0, ...backAt.values()),
    errors,
    firstError,
  };
}

function replicas(): Record<string, string[]> {
  const lists = new Map<string, Set<string>>();
  for (const room of joined) {
    const users = room.roster.members.map((m) => m.user).sort();
    const seen = lists.get(room.room) ?? new Set<string>();
    seen.add(users.join());
    lists.set(room.room, seen);
  }
  return Object.fromEntries([...lists].map(([room, seen]) => [room, [...seen]]));
}
