import { mkdir, writeFile } from "node:fs/promises";
import { availableParallelism, cpus, platform } from "node:os";
import { parseArgs } from "node:util";
import { startEmbeddedRedis, type EmbeddedRedis } from "../src/embedded.js";
import { chart } from "./chart.js";
import { benchCounts, countsSteps } from "./counts.js";
import { benchRoster, rosterSteps } from "./roster.js";
import { benchLog, logSteps } from "./eventLog.js";
import { benchBigRooms, bigRoomsMarkdown, bigRoomsSteps } from "./bigRooms.js";
import { benchFanout, fanoutSteps } from "./fanout.js";
import { benchGateway, gatewaySteps } from "./gateway.js";
import { benchGrace, graceSteps } from "./grace.js";
import { benchHeartbeat, heartbeatSteps } from "./heartbeat.js";
import { Lab } from "./lab.js";
import { benchLive, liveSteps } from "./live.js";
import { benchMemory, memorySteps } from "./memory.js";
import { FULL, SMOKE, type Profile } from "./profile.js";
import { Progress } from "./progress.js";
import { gatewayMarkdown, markdown, type Meta, type Results } from "./report.js";
import { info } from "./stats.js";
import {
  benchSocketIo,
  SOCKETIO_FULL,
  SOCKETIO_SMOKE,
  socketIoMarkdown,
  socketIoSteps,
  type SocketIoResults,
} from "./socketio.js";
import { benchScripts, scriptsSteps } from "./scripts.js";
import { benchSweep, sweepSteps } from "./sweep.js";
import { targets } from "./targets.js";

const USAGE = `Usage: tsx bench/main.ts [--smoke] [--only gateway|big-rooms|socket.io] [--redis-url redis://host:port]

  --smoke      a quick run that only proves the bench works (CI); results go to smoke.*
  --only       run one section alone: gateway (results go to gateway.* or gateway-smoke.*),
               big-rooms (large rooms under churn and a reconnect storm) or socket.io
               (fetchSockets() vs rollcall), which the whole run leaves out: results go to
               big-rooms.* or socketio.* (-smoke.* with --smoke)
  --redis-url  an empty Redis >= 7 to use instead of an embedded redis-server: the bench
               flushes it and resets its INFO statistics`;

const RESULTS = new URL("./results/", import.meta.url);
const ONLY = ["gateway", "big-rooms", "socket.io"] as const;
type Only = (typeof ONLY)[number];

function options(): {
  profile: Profile;
  redisUrl: string | undefined;
  only: Only | undefined;
} {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        smoke: { type: "boolean", default: false },
        only: { type: "string" },
        "redis-url": { type: "string" },
        help: { type: "boolean", default: false },
      },
    });
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    process.exit(2);
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const only = values.only as Only | undefined;
  if (only !== undefined && !ONLY.includes(only)) {
    console.error(`--only takes ${ONLY.join(" or ")}, got ${only}\n\n${USAGE}`);
    process.exit(2);
  }
  return {
    profile: values.smoke ? SMOKE : FULL,
    redisUrl: values["redis-url"],
    only,
  };
}

async function run(profile: Profile, lab: Lab, embedded: boolean): Promise<Results> {
  const progress = new Progress(
    heartbeatSteps(profile) +
      fanoutSteps() +
      gatewaySteps(profile) +
      sweepSteps(profile) +
      liveSteps(profile) +
      memorySteps(profile) +
      countsSteps() +
      rosterSteps(profile) +
      logSteps(profile) +
      graceSteps(profile) +
      scriptsSteps(profile.scripts),
  );
  const started = performance.now();
  try {
    await lab.checkEmpty();
    const server = await info(lab.admin, "server");
    const heartbeat = await benchHeartbeat(lab, profile, progress);
    const fanout = await benchFanout(lab, profile, progress);
    const gateway = await benchGateway(lab, profile, progress);
    const sweep = await benchSweep(lab, profile, progress);
    const live = await benchLive(lab, profile, progress);
    const memory = await benchMemory(lab, profile, progress);
    const counts = await benchCounts(lab, profile, progress);
    const roster = await benchRoster(lab, profile, progress);
    const log = await benchLog(lab, profile, progress);
    const grace = await benchGrace(lab, profile, progress);
    await lab.flush();
    const scripts = await benchScripts(lab, profile.scripts, progress);
    await lab.flush();
    const partial = {
      meta: meta(profile, server, embedded, started),
      heartbeat,
      fanout,
      gateway,
      sweep,
      live,
      memory,
      counts,
      roster,
      log,
      grace,
      scripts,
    };
    return { ...partial, targets: targets(partial) };
  } finally {
    progress.stop();
  }
}

async function runGateway(profile: Profile, lab: Lab, embedded: boolean) {
  const progress = new Progress(gatewaySteps(profile));
  const started = performance.now();
  try {
    await lab.checkEmpty();
    const server = await info(lab.admin, "server");
    const gateway = await benchGateway(lab, profile, progress);
    await lab.flush();
    return { meta: meta(profile, server, embedded, started), gateway };
  } finally {
    progress.stop();
  }
}

/** Large rooms and the storm, alone; saved as big-rooms.md/.json (or big-rooms-smoke.*). */
async function runBigRooms(profile: Profile, lab: Lab, embedded: boolean): Promise<string> {
  const progress = new Progress(bigRoomsSteps(profile.bigRooms));
  const started = performance.now();
  let results;
  try {
    await lab.checkEmpty();
    const server = await info(lab.admin, "server");
    const bigRooms = await benchBigRooms(lab, profile.bigRooms, progress);
    await lab.flush();
    results = { meta: meta(profile, server, embedded, started), bigRooms };
  } finally {
    progress.stop();
  }
  const report = bigRoomsMarkdown(results.bigRooms, results.meta);
  const name = profile.name === "full" ? "big-rooms" : "big-rooms-smoke";
  await mkdir(RESULTS, { recursive: true });
  await writeFile(new URL(`${name}.md`, RESULTS), report);
  await writeFile(new URL(`${name}.json`, RESULTS), JSON.stringify(results, null, 2) + "\n");
  return report;
}

function meta(
  profile: Profile,
  server: Map<string, string>,
  embedded: boolean,
  started: number,
): Meta {
  return {
    date: new Date().toISOString(),
    profile: profile.name,
    redisVersion: server.get("redis_version") ?? "unknown",
    redis: embedded ? "embedded" : "external",
    nodeVersion: process.version,
    cores: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    platform: platform(),
    seconds: Math.round((performance.now() - started) / 1000),
  };
}

async function saveGateway(results: Pick<Results, "gateway" | "meta">): Promise<string> {
  const report = gatewayMarkdown(results);
  const name = results.meta.profile === "full" ? "gateway" : "gateway-smoke";
  await mkdir(RESULTS, { recursive: true });
  await writeFile(new URL(`${name}.md`, RESULTS), report);
  await writeFile(new URL(`${name}.json`, RESULTS), JSON.stringify(results, null, 2) + "\n");
  return report;
}

/** The Socket.IO section, run alone: printed, and saved to socketio.* (socketio-smoke.*). */
async function runSocketIo(profile: Profile, lab: Lab, embedded: boolean): Promise<string> {
  const socketio = profile === FULL ? SOCKETIO_FULL : SOCKETIO_SMOKE;
  const progress = new Progress(socketIoSteps(socketio));
  const started = performance.now();
  let results: SocketIoResults & { meta: Meta };
  try {
    await lab.checkEmpty();
    const server = await info(lab.admin, "server");
    const measured = await benchSocketIo(lab, socketio, progress);
    results = { meta: meta(profile, server, embedded, started), ...measured };
  } finally {
    progress.stop();
  }
  const { meta: m } = results;
  const report = [
    `# Socket.IO presence (${m.date})`,
    "",
    `Redis ${m.redisVersion} (${m.redis}), Node ${m.nodeVersion}, ${m.cores} cores (${m.cpu}), ` +
      `${m.seconds} s. Run: \`npx tsx bench/main.ts --only socket.io${profile === FULL ? "" : " --smoke"}\`.`,
    "",
    socketIoMarkdown(results),
  ].join("\n");
  const name = profile === FULL ? "socketio" : "socketio-smoke";
  await mkdir(RESULTS, { recursive: true });
  await writeFile(new URL(`${name}.md`, RESULTS), report);
  await writeFile(new URL(`${name}.json`, RESULTS), JSON.stringify(results, null, 2) + "\n");
  return report;
}

async function save(results: Results): Promise<string> {
  const report = markdown(results);
  // CI runs --smoke: its results go beside the committed ones (and git ignores them).
  const name = results.meta.profile === "full" ? "latest" : "smoke";
  await mkdir(RESULTS, { recursive: true });
  await writeFile(new URL(`${name}.md`, RESULTS), report);
  await writeFile(new URL(`${name}.json`, RESULTS), JSON.stringify(results, null, 2) + "\n");
  await writeFile(new URL(`${name}.svg`, RESULTS), chart(results));
  return report;
}

async function main(): Promise<void> {
  const { profile, redisUrl, only } = options();
  const embedded: EmbeddedRedis | undefined = redisUrl ? undefined : await startEmbeddedRedis();
  const lab = new Lab(redisUrl ?? embedded!.url);
  // Ctrl-C must not leave a redis-server behind.
  const interrupted = () => {
    lab.close();
    const exit = () => process.exit(130);
    (embedded?.stop() ?? Promise.resolve()).then(exit, exit);
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    if (only === "big-rooms") {
      console.log(await runBigRooms(profile, lab, embedded !== undefined));
    } else if (only === "gateway") {
      console.log(await saveGateway(await runGateway(profile, lab, embedded !== undefined)));
    } else if (only === "socket.io") {
      console.log(await runSocketIo(profile, lab, embedded !== undefined));
    } else {
      console.log(await save(await run(profile, lab, embedded !== undefined)));
    }
  } finally {
    lab.close();
    await embedded?.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
