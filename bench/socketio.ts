// A room's roster on Socket.IO, read the way users do today — `fetchSockets()`, a request over
// @socket.io/redis-adapter to every instance — and through rollcall/socket.io — one roster() read
// of what Redis maintains — across 2 and 4 instances (each a process of its own) holding the
// room's clients between them; then again with one instance stalled (SIGSTOP).
import { fileURLToPath } from "node:url";
import { connectIo, spawnIo, type IoClient, type IoProcess } from "../test/kit/socketio.js";
import { number, table } from "./format.js";
import type { Lab } from "./lab.js";
import type { Progress } from "./progress.js";
import type { Row, Section } from "./section.js";
import { histogram, percentiles, type Percentiles } from "./stats.js";
import type { Measure, Measured } from "./socketioServer.js";

export interface SocketIoProfile {
  name: "full" | "smoke";
  instances: number[];
  clients: number;
  /** Calls of each kind per measurement, after as many again to warm up. */
  samples: number;
  /** fetchSockets() calls with an instance stalled: each waits for the adapter's 5 s timeout. */
  stalledSamples: number;
}

const SOCKETIO_FULL: SocketIoProfile = {
  name: "full",
  instances: [2, 4],
  clients: 200,
  samples: 500,
  stalledSamples: 4,
};

const SOCKETIO_SMOKE: SocketIoProfile = {
  name: "smoke",
  instances: [2],
  clients: 20,
  samples: 20,
  stalledSamples: 1,
};

export interface SocketIoRun {
  instances: number;
  /** One instance SIGSTOPped while measured. */
  stalled: boolean;
  /** fetchSockets() calls that answered, µs, and the sockets the last one found. */
  fetch: Percentiles | null;
  fetchFound: number;
  /** Calls that failed, µs until they did, and the first error. */
  failed: Percentiles | null;
  error: string | null;
  /** roster() reads through rollcall, µs, and the count the last one said. */
  roster: Percentiles;
  rosterCount: number;
}

export interface SocketIoResults {
  profile: SocketIoProfile;
  runs: SocketIoRun[];
}

const SERVER = fileURLToPath(new URL("./socketioServer.ts", import.meta.url));
const ROOM = "room";

function socketIoSteps(profile: SocketIoProfile): number {
  return profile.instances.length * 2;
}

interface Instance extends IoProcess {
  measure(request: Omit<Measure, "type">): Promise<Measured>;
}

async function spawnInstance(redisUrl: string): Promise<Instance> {
  const started = await spawnIo({ redisUrl, adapter: true }, SERVER);
  const { child } = started;
  return {
    ...started,
    measure: (request) =>
      new Promise((resolve) => {
        child.once("message", (result: Measured) => resolve(result));
        child.send({ type: "measure", ...request } satisfies Measure);
      }),
  };
}

function distribution(ms: readonly number[]): Percentiles | null {
  if (ms.length === 0) return null;
  const h = histogram();
  for (const value of ms) h.recordValue(Math.max(1, Math.round(value * 1000)));
  return percentiles(h);
}

function run(instances: number, stalled: boolean, measured: Measured): SocketIoRun {
  return {
    instances,
    stalled,
    fetch: distribution(measured.fetch),
    fetchFound: measured.fetchFound,
    failed: distribution(measured.failed),
    error: measured.error,
    roster: distribution(measured.roster)!,
    rosterCount: measured.rosterCount,
  };
}

async function benchSocketIo(
  lab: Lab,
  profile: SocketIoProfile,
  progress: Progress,
): Promise<SocketIoResults> {
  const runs: SocketIoRun[] = [];
  for (const size of profile.instances) {
    const instances: Instance[] = [];
    const clients: IoClient[] = [];
    try {
      await progress.step(`socket.io: ${size} instances, ${profile.clients} clients`, async () => {
        for (let i = 0; i < size; i++) instances.push(await spawnInstance(lab.url));
        for (let i = 0; i < profile.clients; i++) {
          clients.push(connectIo(instances[i % size]!.url, `user-${i}`));
        }
        await Promise.all(clients.map((c) => c.join(ROOM)));
        const [first] = instances;
        // Every client present in Redis and found by fetchSockets, then a warm-up.
        for (;;) {
          const m = await first!.measure({ room: ROOM, samples: 1 });
          if (m.rosterCount === profile.clients && m.fetchFound === profile.clients) break;
        }
        await first!.measure({ room: ROOM, samples: profile.samples });
        runs.push(run(size, false, await first!.measure({ room: ROOM, samples: profile.samples })));
      });
      await progress.step(`socket.io: ${size} instances, one stalled`, async () => {
        const stalled = instances.at(-1)!.child;
        stalled.kill("SIGSTOP");
        try {
          const m = await instances[0]!.measure({ room: ROOM, samples: profile.stalledSamples });
          runs.push(run(size, true, m));
        } finally {
          stalled.kill("SIGCONT");
        }
      });
    } finally {
      for (const c of clients) c.socket.disconnect();
      await Promise.all(instances.map((i) => i.kill()));
      await lab.flush();
    }
  }
  return { profile, runs };
}

const ms = (p: Percentiles | null, key: "p50" | "p99") => (p ? number(p[key] / 1000, 2) : "—");

function socketIoMarkdown(results: SocketIoResults): string {
  const { profile, runs } = results;
  const rows = runs.map((r) => [
    r.instances,
    r.stalled ? "yes (SIGSTOP)" : "no",
    `${ms(r.fetch, "p50")} / ${ms(r.fetch, "p99")}`,
    r.fetch ? `${r.fetch.count}, ${r.fetchFound} sockets` : "0",
    r.failed ? `${r.failed.count}, after ${ms(r.failed, "p50")} ms` : "0",
    `${ms(r.roster, "p50")} / ${ms(r.roster, "p99")}`,
    r.rosterCount,
  ]);
  const errors = [...new Set(runs.flatMap((r) => (r.error ? [r.error] : [])))];
  return [
    `## Socket.IO: a room's roster, fetchSockets() vs rollcall (${profile.name})`,
    "",
    `${profile.clients} socket.io-client sockets in one room, spread over the instances (each a ` +
      "process of its own, @socket.io/redis-adapter 8 on one Redis, rollcall/socket.io " +
      "tracking the room); instance 1 reads the room one call after another, " +
      `${profile.samples} calls of each kind after as many to warm up ` +
      `(${profile.stalledSamples} fetchSockets() with an instance stalled). Times in ms.`,
    "",
    table(
      [
        "instances",
        "one stalled",
        "fetchSockets() p50 / p99",
        "answered",
        "failed",
        "roster() p50 / p99",
        "roster count",
      ],
      rows,
    ),
    "",
    ...(errors.length > 0 ? [`fetchSockets() failed with: ${errors.join("; ")}`, ""] : []),
    "roster count: what the last roster() read said. With an instance stalled, the reads come " +
      "after the stalled fetchSockets() calls: past the presence window and the grace " +
      "(10 s + 2 s) the other instances' sweepers have announced the stalled instance's users " +
      "gone, and the roster no longer lists them (fetchSockets() never says so).",
    "",
  ].join("\n");
}

/** A room's roster on Socket.IO: fetchSockets() against rollcall; run alone (`--only socket.io`). */
export const socketIo: Section<SocketIoProfile, SocketIoResults> = {
  name: "socket.io",
  alone: true,
  profiles: { full: SOCKETIO_FULL, smoke: SOCKETIO_SMOKE },
  steps: socketIoSteps,
  run: benchSocketIo,
  report: socketIoMarkdown,
  rows: ({ runs }) =>
    runs.flatMap((r): Row[] => {
      const where = `${r.instances} instances${r.stalled ? ", one stalled" : ""}`;
      return [
        ...(r.fetch
          ? [{ name: `fetchSockets() p50, ${where}`, value: r.fetch.p50, unit: "µs" }]
          : []),
        { name: `roster() p50, ${where}`, value: r.roster.p50, unit: "µs" },
      ];
    }),
};
