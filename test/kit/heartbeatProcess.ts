// A server instance as a process of its own, to SIGKILL: one Rollcall on a Cluster client that
// keeps a connection present in a room by heartbeats, as a server keeps its sockets' presence,
// until it dies.
import { Cluster } from "ioredis";
import { Rollcall, type RollcallOptions, type UserStatus } from "../../src/index.js";
import { answer } from "./child.js";
import "./clock.js"; // the same scripts as the test's own Rollcalls run
import { sleep } from "./wait.js";

export interface HeartbeatProcessSettings {
  nodes: { host: string; port: number }[];
  options: RollcallOptions;
  room: string;
  user: string;
  connection: string;
  /** The pause between heartbeats: well within the presence window. */
  everyMs: number;
}

export type HeartbeatProcessRequest =
  /** The first heartbeat (the join), answered with whether it joined; the others follow it. */
  | { type: "start" }
  /** What this instance's status() says of `users`. */
  | { type: "status"; users: string[] };

const settings = answer<HeartbeatProcessSettings>(
  (request: HeartbeatProcessRequest): Promise<boolean | UserStatus[]> =>
    request.type === "start" ? start() : rollcall.status(request.users),
);

const redis: Cluster = new Cluster(settings.nodes).on("error", () => undefined);
const rollcall: Rollcall = new Rollcall(redis, settings.options);

async function start(): Promise<boolean> {
  const beat = () => rollcall.heartbeat(settings.room, settings.user, settings.connection);
  const { joined } = await beat();
  void (async () => {
    for (;;) {
      await sleep(settings.everyMs);
      await beat().catch(() => undefined); // a failed beat: the next one may pass
    }
  })();
  return joined;
}
