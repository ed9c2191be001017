// The connection host's own costs (the gateway on src/runtime/host.ts), beside a plain `ws`
// server doing the same per frame (test/kit/gatewayProcess.ts, plain and answering: parse the
// JSON frame, answer it): CPU per frame, bytes per idle socket and per socket in a room, upgrades per second, and
// an event's way across two gateways. Every server is a process of its own on loopback; the
// bench process drives them over raw `ws` sockets and reads their figures over IPC.
//
//   npx tsx bench/host.ts [--smoke] [--profile <dir>]
//
// With --profile, the gateway under the frame load runs with --cpu-prof (a .cpuprofile in
// <dir>) and a heap snapshot of the gateway holding its sockets in their rooms is written there.
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { startEmbeddedRedis } from "../src/embedded.js";
import type { RollcallOptions } from "../src/index.js";
import { GatewayChild, token } from "../test/kit/gatewayChild.js";
import { acrossGateways, BenchSocket, openAll } from "./benchSocket.js";
import { forEachInFlight } from "./drive.js";
import { scriptCalls } from "./stats.js";
import type { Lab } from "./lab.js";
import type { Progress } from "./progress.js";
import { met, type Row, type Section } from "./section.js";

/** Nobody expires during a run; a leave is announced at once. */
const ENGINE: RollcallOptions = { presenceWindowMs: 600_000, leaveGraceMs: 0, prefix: "hb" };

/** A gateway, or (`plain`) the plain server answering frames: each a process of its own. */
function start(redisUrl: string, plain: boolean, cpuProfileDir?: string): Promise<GatewayChild> {
  return GatewayChild.start(redisUrl, plain, {
    engine: ENGINE,
    answers: plain,
    ...(cpuProfileDir === undefined ? {} : { cpuProfileDir }),
  });
}

export interface HostProfile {
  /** Sockets opened on each server (idle, then joined on the gateway), `opening` at a time. */
  sockets: number;
  opening: number;
  roomSize: number;
  /** Frame load: sockets (one room each), frames outstanding per socket, run length, runs at
   * the server's own pace, and the frames a second of the paced run. */
  frames: { sockets: number; inFlight: number; runMs: number; repeats: number; rate: number };
  /** Fan-out across two gateways: rooms, and samples of each event. */
  fanout: { rooms: number; samples: number };
}

export const HOST_PROFILES: Record<"full" | "smoke", HostProfile> = {
  full: {
    sockets: 5_000,
    opening: 100,
    roomSize: 20,
    frames: { sockets: 200, inFlight: 2, runMs: 3_000, repeats: 1, rate: 8_000 },
    fanout: { rooms: 20, samples: 1_000 },
  },
  smoke: {
    sockets: 500,
    opening: 50,
    roomSize: 20,
    frames: { sockets: 50, inFlight: 2, runMs: 500, repeats: 1, rate: 2_000 },
    fanout: { rooms: 5, samples: 50 },
  },
};

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

export interface SocketsRun {
  upgradesPerSec: number;
  /** The server's CPU (user + system) per socket opened: what an upgrade costs it. */
  cpuUsPerUpgrade: number;
  /** RSS and heap per idle socket; per socket joined to its room (gateway only). */
  idle: { rss: number; heap: number };
  joined?: { rss: number; heap: number; joinsPerSec: number };
}

/**
 * Opens `sockets` on a server (the tokens signed beforehand): upgrades per second, then the
 * process's bytes per socket after full collections; on a gateway the sockets then join rooms of
 * `roomSize` with a small state, and the bytes per socket are weighed again.
 */
async function socketsRun(
  redisUrl: string,
  plain: boolean,
  p: HostProfile,
  round: number,
  profile?: { dir: string; heap: boolean },
) {
  const heapDir = profile?.heap ? profile.dir : undefined;
  const cpuDir = profile?.heap ? undefined : profile?.dir;
  const kind = plain ? "plain" : "gateway";
  const server = await start(redisUrl, plain);
  try {
    const users = Array.from({ length: p.sockets }, (_, i) => `s${round}-${i}`);
    const jwts = await Promise.all(users.map(token));
    // Warm-up: a few sockets come and go (and join, on the gateway), every path loaded.
    const warm = await openAll(
      server.url,
      ["w0", "w1", "w2"].map((w) => `${w}-${round}`),
      3,
    );
    if (!plain)
      await Promise.all(warm.map((s) => s.request({ type: "join", room: `warm-${round}` })));
    for (const s of warm) s.close();
    await server.drained();
    const snapshot = async (phase: string) => {
      if (heapDir) await server.heapSnapshot(`${heapDir}/${kind}-${phase}.heapsnapshot`);
    };
    const base = await server.stats(true);
    await snapshot("base");
    const sockets: BenchSocket[] = [];
    if (cpuDir) await server.profile();
    const started = performance.now();
    await forEachInFlight(jwts, p.opening, async (jwt) => {
      sockets.push(await BenchSocket.withToken(server.url, jwt));
    });
    const upgradesPerSec = p.sockets / ((performance.now() - started) / 1000);
    const cpuUsPerUpgrade = ((await server.stats()).cpuUs - base.cpuUs) / p.sockets;
    if (cpuDir) await server.profile(`${cpuDir}/${kind}-upgrades.cpuprofile`);
    const open = await server.stats(true);
    if (open.connections !== p.sockets) throw new Error(`held ${open.connections} sockets`);
    await snapshot("open");
    const run: SocketsRun = {
      upgradesPerSec,
      cpuUsPerUpgrade,
      idle: {
        rss: (open.rss - base.rss) / p.sockets,
        heap: (open.heapUsed - base.heapUsed) / p.sockets,
      },
    };
    if (!plain) {
      const joining = performance.now();
      await forEachInFlight(
        sockets.map((s, i) => [s, i] as const),
        p.opening,
        ([s, i]) =>
          s.request({
            type: "join",
            room: `r${round}-${Math.floor(i / p.roomSize)}`,
            state: { status: "online" },
          }),
      );
      const joinsPerSec = p.sockets / ((performance.now() - joining) / 1000);
      const joined = await server.stats(true);
      run.joined = {
        rss: (joined.rss - base.rss) / p.sockets,
        heap: (joined.heapUsed - base.heapUsed) / p.sockets,
        joinsPerSec,
      };
      await snapshot("joined");
    }
    for (const s of sockets) s.close();
    await server.drained();
    await server.checkErrors();
    return run;
  } finally {
    await server.stop();
  }
}

export interface FramesRun {
  framesPerSec: number;
  /** Script calls (EVALSHA) Redis ran per frame. */
  callsPerFrame: number;
  cpuUsPerFrame: number;
  /** The server's CPU in shares of one core. */
  cpu: number;
}

/** A server's runs: at its own pace (as fast as it answers), and paced at `frames.rate`. */
export interface FramesRuns {
  saturated: FramesRun[];
  paced: FramesRun;
}

/**
 * `frames.sockets` sockets (on a gateway, each in one room of 10) send heartbeat frames with a
 * ref: first each keeping `inFlight` outstanding (frames answered per second, and the server's
 * CPU per frame at its own pace), then `rate` frames a second between them (the CPU per frame
 * at the same work a second for either server: on a shared machine, the figure to compare).
 */
async function framesRun(
  redisUrl: string,
  plain: boolean,
  p: HostProfile,
  round: number,
  profileDir?: string,
): Promise<FramesRuns> {
  const { sockets: count, inFlight, runMs, repeats, rate } = p.frames;
  const server = await start(redisUrl, plain, plain ? undefined : profileDir);
  const admin = new Redis(redisUrl);
  try {
    const users = Array.from({ length: count }, (_, i) => `f${round}-${i}`);
    const sockets = await openAll(server.url, users, 50);
    if (!plain) {
      await forEachInFlight(
        sockets.map((s, i) => [s, i] as const),
        50,
        ([s, i]) => s.request({ type: "join", room: `f${round}-${Math.floor(i / 10)}` }),
      );
    }
    let frames = 0;
    let failure: Error | undefined;
    const failed = (error: unknown) => {
      failure ??= error instanceof Error ? error : new Error(String(error));
    };
    const measure = async (): Promise<FramesRun> => {
      const snapshot = async () => ({
        at: performance.now(),
        frames,
        cpu: (await server.stats()).cpuUs,
        calls: await scriptCalls(admin),
      });
      const before = await snapshot();
      await sleep(runMs);
      const after = await snapshot();
      if (failure) throw failure;
      const n = after.frames - before.frames;
      const seconds = (after.at - before.at) / 1000;
      return {
        framesPerSec: n / seconds,
        cpuUsPerFrame: (after.cpu - before.cpu) / n,
        callsPerFrame: (after.calls - before.calls) / n,
        cpu: (after.cpu - before.cpu) / 1e6 / seconds,
      };
    };

    let running = true;
    const loops = sockets.flatMap((socket) =>
      Array.from({ length: inFlight }, async () => {
        try {
          while (running && !failure) {
            await socket.request({ type: "heartbeat" });
            frames += 1;
          }
        } catch (error) {
          failed(error);
        }
      }),
    );
    await sleep(Math.min(1_000, runMs / 2));
    const saturated: FramesRun[] = [];
    try {
      for (let r = 0; r < repeats; r++) saturated.push(await measure());
    } finally {
      running = false;
      await Promise.all(loops);
    }

    // Paced: frames go out as the clock says they are due, round the sockets (none waits for
    // an answer; a socket more than `inFlight` × 4 behind skips its turn).
    const outstanding = new Map<BenchSocket, number>();
    const started = performance.now();
    let sent = 0;
    let next = 0;
    const pacer = setInterval(() => {
      const due = Math.floor(((performance.now() - started) / 1000) * rate);
      for (; sent < due; sent++) {
        const socket = sockets[next++ % sockets.length]!;
        const waiting = outstanding.get(socket) ?? 0;
        if (waiting >= inFlight * 4) continue;
        outstanding.set(socket, waiting + 1);
        socket.request({ type: "heartbeat" }).then(() => {
          frames += 1;
          outstanding.set(socket, outstanding.get(socket)! - 1);
        }, failed);
      }
    }, 2);
    let paced: FramesRun;
    try {
      await sleep(Math.min(1_000, runMs / 2));
      paced = await measure();
    } finally {
      clearInterval(pacer);
    }
    while ([...outstanding.values()].some((n) => n > 0) && !failure) await sleep(10);
    if (failure) throw failure;
    for (const s of sockets) s.close();
    await server.drained();
    await server.checkErrors();
    return { saturated, paced };
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

export interface Latency {
  p50: number;
  p99: number;
  max: number;
  samples: number;
}

function latency(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted.at(-1)!,
    samples: sorted.length,
  };
}

/**
 * Two gateways, A and B, rooms each with a resident socket on A and a watcher on B; newcomers on
 * A send join, typing and leave one frame at a time: µs from the send to the event's arrival on
 * the watcher (one clock, the bench's). Beside it, the plain server's round trip of one frame at
 * a time: the floor two loopback hops and two processes put under any such figure here.
 */
async function fanoutRun(redisUrl: string, p: HostProfile) {
  const { rooms: roomCount, samples } = p.fanout;
  const [a, b] = await Promise.all([start(redisUrl, false), start(redisUrl, false)]);
  const plain = await start(redisUrl, true);
  try {
    const rooms = Array.from({ length: roomCount }, (_, i) => `fan-${i}`);
    const expected = new Map<string, (at: number) => void>();
    const { watchers, residents, senders } = await acrossGateways(
      a.url,
      b.url,
      rooms,
      10,
      (key, at) => expected.get(key)?.(at),
    );
    const series = { join: [] as number[], typing: [] as number[], leave: [] as number[] };
    const time = async (key: string, out: number[] | undefined, frame: () => Promise<unknown>) => {
      const started = performance.now();
      const arrived = new Promise<number>((resolve) => expected.set(key, resolve));
      const [at] = await Promise.all([arrived, frame()]);
      expected.delete(key);
      out?.push((at - started) * 1000);
    };
    const warmup = Math.min(100, samples);
    for (let i = 0; i < warmup + samples; i++) {
      const record = i >= warmup;
      const room = rooms[i % rooms.length]!;
      const sender = senders[i % senders.length]!;
      const user = `newcomer-${i % senders.length}`;
      const at = `${room} ${user}`;
      await time(`join ${at}`, record ? series.join : undefined, () =>
        sender.request({ type: "join", room }),
      );
      await time(`typing-start ${at}`, record ? series.typing : undefined, () =>
        sender.request({ type: "typing", room }),
      );
      await time(`leave ${at}`, record ? series.leave : undefined, () =>
        sender.request({ type: "leave", room }),
      );
    }
    const [echo] = await openAll(plain.url, ["echo"], 1);
    const trips: number[] = [];
    for (let i = 0; i < warmup + samples * 3; i++) {
      const started = performance.now();
      await echo!.request({ type: "heartbeat" });
      if (i >= warmup) trips.push((performance.now() - started) * 1000);
    }
    for (const s of [...watchers, ...residents, ...senders, echo!]) s.close();
    await Promise.all([a.drained(), b.drained()]);
    await a.checkErrors();
    await b.checkErrors();
    return {
      join: latency(series.join),
      typing: latency(series.typing),
      leave: latency(series.leave),
      all: latency([...series.join, ...series.typing, ...series.leave]),
      plainRoundTrip: latency(trips),
    };
  } finally {
    await Promise.all([a.stop(), b.stop(), plain.stop()]);
  }
}

export interface HostResults {
  sockets?: { gateway: SocketsRun[]; plain: SocketsRun[] };
  frames?: { gateway: FramesRuns[]; plain: FramesRuns[] };
  fanout?: Awaited<ReturnType<typeof fanoutRun>>;
}

export const HOST_PARTS = ["sockets", "frames", "fanout"] as const;
export type HostPart = (typeof HOST_PARTS)[number];

/** Runs one step of work under its label (the bench's progress bar, or a line on stdout). */
type Step = <T>(label: string, work: () => Promise<T>) => Promise<T>;

/** Runs the measurements: the servers alternate, so that the machine's noise falls on both. */
export async function benchHost(
  redisUrl: string,
  p: HostProfile,
  step: Step,
  options: { profileDir?: string; heap?: boolean; parts?: readonly HostPart[] } = {},
): Promise<HostResults> {
  const { profileDir, heap = false, parts = HOST_PARTS } = options;
  const results: HostResults = {};
  if (parts.includes("sockets")) {
    const sockets = (results.sockets = { gateway: [] as SocketsRun[], plain: [] as SocketsRun[] });
    for (let round = 0; round < ROUNDS; round++) {
      const profile = round === 0 && profileDir ? { dir: profileDir, heap } : undefined;
      for (const plain of [true, false]) {
        const label = `host: ${p.sockets} sockets on a ${plain ? "plain ws server" : "gateway"}, round ${round + 1}`;
        const run = await step(label, () => socketsRun(redisUrl, plain, p, round, profile));
        sockets[plain ? "plain" : "gateway"].push(run);
      }
    }
  }
  if (parts.includes("frames")) {
    const frames = (results.frames = { gateway: [] as FramesRuns[], plain: [] as FramesRuns[] });
    for (let round = 0; round < ROUNDS; round++) {
      const cpuDir = round === 0 ? profileDir : undefined;
      for (const plain of [true, false]) {
        const label = `host: heartbeat frames on a ${plain ? "plain ws server" : "gateway"}, round ${round + 1}`;
        const runs = await step(label, () => framesRun(redisUrl, plain, p, round, cpuDir));
        frames[plain ? "plain" : "gateway"].push(runs);
      }
    }
  }
  if (parts.includes("fanout")) {
    results.fanout = await step("host: fan-out across two gateways", () => fanoutRun(redisUrl, p));
  }
  return results;
}

/** Each server is measured this many times, the two kinds alternating. */
const ROUNDS = 2;

const least = <T>(items: readonly T[], f: (t: T) => number) => Math.min(...items.map(f));
const most = <T>(items: readonly T[], f: (t: T) => number) => Math.max(...items.map(f));

/** The figures held to the issue's targets, each the best of its runs (the machine is noisy). */
export function hostRows(r: HostResults): Row[] {
  const rows: Row[] = [];
  if (r.frames) {
    const paced = (xs: FramesRuns[]) => least(xs, (x) => x.paced.cpuUsPerFrame);
    const ownPace = (xs: FramesRuns[]) =>
      least(
        xs.flatMap((x) => x.saturated),
        (x) => x.cpuUsPerFrame,
      );
    const fastest = (xs: FramesRuns[]) =>
      most(
        xs.flatMap((x) => x.saturated),
        (x) => x.framesPerSec,
      );
    const rate = Math.round(r.frames.plain[0]!.paced.framesPerSec / 100) * 100;
    const [gateway, plain] = [ownPace(r.frames.gateway), ownPace(r.frames.plain)];
    const [gatewayPaced, plainPaced] = [paced(r.frames.gateway), paced(r.frames.plain)];
    rows.push(
      {
        name: "host: CPU per heartbeat frame at each server's own pace, gateway ÷ plain ws (parse, answer), ≤ 2×",
        value: gateway / plain,
        unit: "×",
        digits: 2,
        note: `${gateway.toFixed(1)} against ${plain.toFixed(1)} µs; up to ${Math.round(fastest(r.frames.gateway))} against ${Math.round(fastest(r.frames.plain))} frames/s`,
        target: { op: "≤", limit: 2 },
      },
      {
        name: `host: CPU per heartbeat frame at ${rate} frames/s, gateway ÷ plain ws, ≤ 2×`,
        value: gatewayPaced / plainPaced,
        unit: "×",
        digits: 2,
        note: `${gatewayPaced.toFixed(1)} against ${plainPaced.toFixed(1)} µs`,
        target: { op: "≤", limit: 2 },
      },
    );
  }
  if (r.sockets) {
    const joined = least(r.sockets.gateway, (x) => x.joined!.rss);
    const idleGateway = least(r.sockets.gateway, (x) => x.idle.rss);
    const idlePlain = least(r.sockets.plain, (x) => x.idle.rss);
    const cpuGateway = least(r.sockets.gateway, (x) => x.cpuUsPerUpgrade);
    const cpuPlain = least(r.sockets.plain, (x) => x.cpuUsPerUpgrade);
    const upgradesGateway = most(r.sockets.gateway, (x) => x.upgradesPerSec);
    const upgradesPlain = most(r.sockets.plain, (x) => x.upgradesPerSec);
    rows.push(
      {
        name: "host: RSS per socket in a room, ≤ 8 KB",
        value: joined,
        unit: "B",
        target: { op: "≤", limit: 8_000 },
      },
      {
        name: "host: RSS per idle socket over plain ws, ≤ 1 KB",
        value: idleGateway - idlePlain,
        unit: "B",
        note: `${Math.round(idleGateway)} against ${Math.round(idlePlain)} B`,
        target: { op: "≤", limit: 1_000 },
      },
      {
        name: "host: upgrades a core sustains, gateway (JWT verified) ÷ plain ws, ≥ 0.8×",
        value: cpuPlain / cpuGateway,
        unit: "×",
        digits: 2,
        note: `${Math.round(cpuGateway)} against ${Math.round(cpuPlain)} µs of CPU an upgrade; measured ${Math.round(upgradesGateway)} against ${Math.round(upgradesPlain)} upgrades/s`,
        target: { op: "≥", limit: 0.8 },
      },
    );
  }
  if (r.fanout) {
    rows.push({
      name: "host: an event across two gateways, p99, ≤ 2 ms",
      value: r.fanout.all.p99 / 1000,
      unit: "ms",
      digits: 2,
      note: `p50 ${(r.fanout.all.p50 / 1000).toFixed(2)} ms; a plain ws round trip's p99 ${(r.fanout.plainRoundTrip.p99 / 1000).toFixed(2)} ms`,
      target: { op: "≤", limit: 2 },
    });
  }
  return rows;
}

const number = (v: number) =>
  v >= 100 ? Math.round(v).toLocaleString("en-US") : v >= 10 ? v.toFixed(1) : v.toFixed(2);

function table(head: string[], body: (string | number)[][]): string {
  return [
    head,
    head.map(() => "---"),
    ...body.map((row) => row.map((c) => (typeof c === "number" ? number(c) : c))),
  ]
    .map((row) => `| ${row.join(" | ")} |`)
    .join("\n");
}

/**
 * What the profiles said (`npx tsx bench/host.ts --profile DIR`, and `--heap` for the heap
 * snapshots), written down once: they explain the figures, they are not re-measured each run.
 */
const WHERE_IT_GOES = [
  "Where the time and the bytes go (profiles of the gateway process, `npx tsx bench/host.ts --profile DIR`; heap snapshots with `--heap`):",
  "",
  "- **A frame.** Reading the frame and writing the ack (`ws`, the socket's syscalls) cost what they cost the plain server; the rest is the Redis call the frame's heartbeat rides in: ioredis's write of it (a syscall per call, the largest single item of the gateway's own time) and its reply. The host's own code (parse, rate limit, the connection's turn, the batch) is a few per cent. So the gateway's cost per frame is mostly the calls per frame: one call per bucket per batch, shared by the frames a batch gathers. Under load one batch is under way at a time and the next gathers what arrives meanwhile (0.07–0.1 calls a frame); at a few thousand frames a second the batches are small (0.2–0.35 calls a frame) and the ratio to the plain server grows.",
  "- **An upgrade.** Half of the gateway's CPU per upgrade beyond the plain server's is the HS256 verification (jose through WebCrypto, 57–83 µs a token measured alone against 12 µs for node:crypto's HMAC on the same tokens); the rest is the admission (origin, caps, the `authenticate` deadline's timer) and the session.",
  "- **An idle socket.** Over the plain server's `ws` and `net` objects: the session, its rollcall connection (id string), the user's frame budget, the kept identity (its `rooms` array) and the entries of the gateway's maps, about 0.9 KB of heap. RSS after full collections adds to that what the extra allocations of an upgrade leave in the heap's pages.",
  "- **A socket in a room.** A plain `ws` socket alone weighs about 7 KB of RSS on this machine, most of an 8 KB budget before the gateway keeps anything; a join adds about 1.5 KB of heap (the connection's rooms map and its heartbeat entry, the turn object of its calls, its share of the room's feed, and a small Buffer per socket held by the socket's stream), and RSS about twice that.",
].join("\n");

/** The section's markdown: the targets, then each measurement's runs. */
export function hostReport(r: HostResults): string {
  const out = [
    "## The connection host's own costs",
    "",
    "A `Gateway` (the connection host under its WebSocket adapter: a JWT secret, no Sweeper, pings off, rate limits raised) beside a plain `ws` server doing the same per frame (`test/kit/gatewayProcess.ts`, plain with `answers`: it parses each JSON frame and answers it with an ack of its ref, and sends a welcome like the gateway's), each a process of its own on loopback; the bench drives them over raw `ws` sockets. The kinds alternate, two rounds each, and a target (in the Targets table) is held by the best round of each: the machine is shared and noisy, and the rounds below show how much.",
    "",
    WHERE_IT_GOES,
  ];
  if (r.frames) {
    const runs = (label: string, xs: FramesRuns[]) =>
      xs.flatMap((x, i) =>
        [...x.saturated.map((run) => ["own pace", run] as const), ["paced", x.paced] as const].map(
          ([pace, run]) => [
            `${label} ${i + 1}, ${pace}`,
            run.framesPerSec,
            run.cpuUsPerFrame,
            `${Math.round(run.cpu * 100)}%`,
            run.callsPerFrame,
          ],
        ),
      );
    out.push(
      "",
      "### Heartbeat frames",
      "",
      "Sockets (on the gateway each in one room of 10) send `heartbeat` frames with a ref: first at the server's own pace (each socket keeps two outstanding), then paced at the same frames a second for either server (the figure the target holds, since a server's CPU per frame falls as its load rises). CPU: the server's own `process.cpuUsage()` over the run, per frame answered.",
      "",
      table(
        ["run", "frames/s", "CPU µs/frame", "server CPU", "script calls/frame"],
        [...runs("plain ws", r.frames.plain), ...runs("gateway", r.frames.gateway)],
      ),
    );
  }
  if (r.sockets) {
    const sockets = (label: string, xs: SocketsRun[]) =>
      xs.map((x, i) => [
        `${label} ${i + 1}`,
        x.upgradesPerSec,
        x.cpuUsPerUpgrade,
        x.idle.rss,
        x.idle.heap,
        x.joined?.rss ?? "—",
        x.joined?.heap ?? "—",
      ]);
    out.push(
      "",
      "### Sockets",
      "",
      "Each socket opens with a token of its own (signed beforehand), 100 handshakes under way at once; on the gateway they then join rooms of 20 with a small state. Bytes per socket: the process after two full collections, less before any socket, ÷ sockets. CPU per upgrade: the server's CPU while they opened, ÷ sockets (what bounds the upgrades a core can take, whatever the bench's own speed).",
      "",
      table(
        [
          "run",
          "upgrades/s",
          "CPU µs/upgrade",
          "idle RSS B",
          "idle heap B",
          "in a room RSS B",
          "in a room heap B",
        ],
        [...sockets("plain ws", r.sockets.plain), ...sockets("gateway", r.sockets.gateway)],
      ),
    );
  }
  const fan = r.fanout;
  if (fan) {
    const line = (label: string, l: Latency) => [label, l.p50, l.p99, l.max, l.samples];
    out.push(
      "",
      "### An event across two gateways",
      "",
      "Gateways A and B; each room has a resident socket on A and a watcher on B. Newcomers on A send join, typing and leave one frame at a time: µs from the send to the event frame's arrival on the watcher (one clock, the bench's). Beside it, a plain `ws` server's round trip of one frame at a time: the floor that two loopback hops between processes put under such a figure on this machine.",
      "",
      table(
        ["event", "p50", "p99", "max", "samples"],
        [
          line("join", fan.join),
          line("typing", fan.typing),
          line("leave", fan.leave),
          line("all", fan.all),
          line("plain ws round trip", fan.plainRoundTrip),
        ],
      ),
    );
  }
  return [...out, ""].join("\n");
}

export const host: Section<HostProfile, HostResults> = {
  name: "host",
  profiles: HOST_PROFILES,
  // Two minutes of its own, much of it beside what the gateway section measures: by itself.
  alone: true,
  steps: () => ROUNDS * 2 * 2 + 1,
  run: (lab: Lab, profile: HostProfile, progress: Progress) =>
    benchHost(lab.url, profile, (label, work) => progress.step(label, work)),
  report: hostReport,
  rows: hostRows,
};

// Alone: npx tsx bench/host.ts [--smoke] [--only sockets,frames,fanout] [--profile DIR [--heap]]:
// with --profile, the first round's servers run with --cpu-prof (a .cpuprofile each in DIR), or
// with --heap write heap snapshots of the sockets' phases there instead.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const smoke = process.argv.includes("--smoke");
  const at = process.argv.indexOf("--profile");
  const profileDir = at > 0 ? process.argv[at + 1] : undefined;
  const heap = process.argv.includes("--heap");
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const only = process.argv.indexOf("--only");
  const parts = only > 0 ? (process.argv[only + 1]!.split(",") as HostPart[]) : undefined;
  const redis = await startEmbeddedRedis();
  try {
    const results = await benchHost(
      redis.url,
      HOST_PROFILES[smoke ? "smoke" : "full"],
      (label, work) => {
        console.error(label);
        return work();
      },
      {
        ...(profileDir === undefined ? {} : { profileDir, heap }),
        ...(parts === undefined ? {} : { parts }),
      },
    );
    const rows = hostRows(results).map((row) => [
      row.name,
      `${number(row.value)}${row.unit === "×" ? "" : " "}${row.unit}${row.note ? ` (${row.note})` : ""}`,
      met(row) ? "met" : "**not met**",
    ]);
    console.log(`${table(["target", "measured", ""], rows)}\n\n${hostReport(results)}`);
    if (profileDir) writeFileSync(`${profileDir}/host.json`, JSON.stringify(results, null, 2));
  } finally {
    await redis.stop();
  }
}
