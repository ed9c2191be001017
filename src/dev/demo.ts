// The main job: two gateway instances, each a process serving the demo page, share the room
// "lobby" through one Redis. Open a page on each and watch presence cross between them; every
// event of the lobby prints here as it arrives. Runs until Ctrl-C.
//   --scripted (or DEMO_SCRIPTED=1): two bots, through the browser client over `ws`, play a short
//   scenario instead, and the process exits 0 once every expected event has come.
// Uses REDIS_URL when set, otherwise a throwaway embedded redis-server.
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import WebSocket from "ws";
import { RollcallClient } from "../client/index.js";
import { REDIS_OPTIONS } from "../engine/redisOptions.js";
import { Rollcall } from "../engine/rollcall.js";
import type { PresenceEvent } from "../protocol/events.js";
import { Subscriber } from "../runtime/subscriber.js";
import { startEmbeddedRedis, type EmbeddedRedis } from "../embedded.js";
import {
  DEMO_PREFIX,
  engineOptions,
  spawnGateway,
  windowsFrom,
  type GatewayProcess,
} from "./instances.js";

const ROOM = "lobby";
const PORTS = [8081, 8082];
const scripted = process.argv.includes("--scripted") || process.env.DEMO_SCRIPTED === "1";
const windows = windowsFrom();
const started = Date.now();

function say(who: string, text: string): void {
  const t = ((Date.now() - started) / 1000).toFixed(1).padStart(5);
  console.log(`${t}s  ${who.padEnd(8)} ${text}`);
}

function describe(e: PresenceEvent): string {
  switch (e.type) {
    case "join":
      return `+ ${e.user} joined${e.state ? ` ${JSON.stringify(e.state)}` : ""}  (${e.count} online: ${e.roster.join(", ")})`;
    case "leave":
      return `- ${e.user} left, ${e.reason}  (${e.count} online${e.count ? `: ${e.roster.join(", ")}` : ""})`;
    case "typing-start":
      return `… ${e.user} is typing`;
    case "typing-stop":
      return `. ${e.user} stopped typing (${e.reason})`;
    case "update":
      return `~ ${e.user} is now ${JSON.stringify(e.state)}`;
  }
}

/** The browser client in Node, as a bot: a token from the instance's demo endpoint. */
function bot(gateway: GatewayProcess, user: string): RollcallClient {
  return new RollcallClient(`ws://127.0.0.1:${gateway.port}/presence`, {
    token: async () => {
      const response = await fetch(`${gateway.url}token?user=${encodeURIComponent(user)}`);
      return ((await response.json()) as { token: string }).token;
    },
    WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
    reconnectMs: { first: 250, max: 1_000 },
  });
}

/** Two bots on two instances; one instance dies without a word and the other one's Sweeper
 * announces its users. Throws unless the lobby's events are exactly the expected ones. */
async function scenario(events: PresenceEvent[], [east, west]: GatewayProcess[]): Promise<void> {
  const until = async (what: string, check: () => boolean, ms = 5_000) => {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  };
  const seen = (type: string, user: string) => () =>
    events.some((e) => e.type === type && e.user === user);
  const step = (text: string) => say("demo", text);

  step(`ann joins on :${east!.port}`);
  const ann = bot(east!, "ann");
  const annRoom = await ann.join(ROOM, { state: { status: "online" } });
  await until("ann's join", seen("join", "ann"));

  step(`bob joins on :${west!.port}`);
  const bob = bot(west!, "bob");
  const bobRoom = await bob.join(ROOM, { state: { status: "online" } });
  await until("bob's join on ann's replica", () => annRoom.roster.count === 2);

  step(`ann opens a second tab, on :${west!.port}: one member still, no event`);
  const annTab = bot(west!, "ann");
  await annTab.join(ROOM);

  step("bob types, then sends: his indicator stops at once");
  bobRoom.typing();
  await until("bob typing on ann's replica", () => annRoom.roster.typing.includes("bob"));
  bobRoom.stopTyping();
  await until("bob's typing-stop", seen("typing-stop", "bob"));

  step("ann goes away: one update");
  await annRoom.setState({ status: "away" });
  await until("ann's update on bob's replica", () =>
    bobRoom.roster.members.some((m) => m.user === "ann" && m.state?.status === "away"),
  );

  step(`the gateway on :${west!.port} is killed (SIGKILL): its sockets drop without a close`);
  const killedAt = Date.now();
  west!.child.kill("SIGKILL");
  await west!.exited;
  bob.close();
  annTab.close();
  const bound = windows.presenceWindowMs + windows.leaveGraceMs + windows.sweepMs + 2_000;
  await until("bob's leave", seen("leave", "bob"), bound);
  step(
    `bob swept by :${east!.port} after ${Date.now() - killedAt} ms (window ${windows.presenceWindowMs} ms); ann stays, on her first tab`,
  );

  step("ann closes her last tab");
  ann.close();
  await until("ann's leave", seen("leave", "ann"));

  const got = events.map((e) => `${e.type}:${e.user}${"reason" in e ? `:${e.reason}` : ""}`);
  const expected = [
    "join:ann",
    "join:bob",
    "typing-start:bob",
    "typing-stop:bob:explicit",
    "update:ann",
    "leave:bob:expired",
    "leave:ann:explicit",
  ];
  if (JSON.stringify(got) !== JSON.stringify(expected)) {
    throw new Error(`events ${got.join(", ")}; expected ${expected.join(", ")}`);
  }
  step(`scripted demo OK: ${expected.length} events, as expected`);
}

async function main(): Promise<number> {
  let embedded: EmbeddedRedis | undefined;
  const url = process.env.REDIS_URL ?? (embedded = await startEmbeddedRedis()).url;
  say("demo", `Redis at ${url}${embedded ? " (embedded)" : ""}; room "${ROOM}"`);
  const redis = new Redis(url, REDIS_OPTIONS);
  const rollcall = new Rollcall(redis, engineOptions(windows));
  const subscriber = new Subscriber(rollcall);
  subscriber.on("error", (error) => say("demo", `subscriber: ${error.message}`));
  const events: PresenceEvent[] = [];
  await subscriber.subscribe(ROOM, (event) => {
    events.push(event);
    say(`[${ROOM}]`, describe(event));
  });

  const gateways: GatewayProcess[] = [];
  const stopAll = async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    subscriber.close();
    redis.disconnect();
    await embedded?.stop();
  };
  const spawned = await Promise.allSettled(
    PORTS.map((port) =>
      spawnGateway({ redisUrl: url, port: scripted ? 0 : port, windows, fallback: true }),
    ),
  );
  for (const s of spawned) if (s.status === "fulfilled") gateways.push(s.value);
  const failed = spawned.find((s) => s.status === "rejected");
  if (failed) {
    await stopAll();
    throw failed.reason;
  }
  const [east, west] = gateways;

  if (scripted) {
    try {
      await scenario(events, gateways);
      return 0;
    } catch (error) {
      say("demo", `FAILED: ${(error as Error).message}`);
      return 1;
    } finally {
      await stopAll();
    }
  }

  console.log(
    `\n  open ${east!.url}?user=ann and ${west!.url}?user=bob\n` +
      `  (a page per gateway instance; ?room=NAME for another room; open a second tab as ann)\n` +
      `  presence window ${windows.presenceWindowMs / 1000} s, typing ${windows.typingWindowMs / 1000} s, ` +
      `leave grace ${windows.leaveGraceMs / 1000} s (reload a page: nobody leaves). ` +
      `Try kill -9 ${west!.child.pid} (the gateway on :${west!.port}):\n` +
      `  its users are announced by the other instance's Sweeper.\n` +
      `  metrics (OpenTelemetry, Prometheus format): ${east!.url}metrics and ${west!.url}metrics\n` +
      `  its deployment from the command line: node dist/cli/main.js --redis ${url} --prefix ${DEMO_PREFIX} watch ${ROOM}\n` +
      `  Ctrl-C stops the demo.\n`,
  );
  let stopping = false;
  for (const g of gateways) {
    void g.exited.then((code) => {
      if (!stopping) say("demo", `the gateway on :${g.port} is gone (${code ?? "killed"})`);
    });
  }
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  stopping = true;
  say("demo", "stopping");
  await stopAll();
  return 0;
}

process.exitCode = await main();
