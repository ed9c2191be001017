// The main job: two server instances share one room through Redis. Users join and type, one
// client vanishes without a close frame and is swept; every event is printed as it arrives.
// Uses REDIS_URL when set, otherwise a throwaway embedded redis-server.
import { Redis } from "ioredis";
import { startEmbeddedRedis, type EmbeddedRedis } from "./embedded.js";
import type { PresenceEvent } from "../protocol/events.js";
import { Rollcall } from "../engine/rollcall.js";
import { Subscriber } from "../runtime/subscriber.js";
import { Sweeper } from "../runtime/sweeper.js";

const ROOM = "design-review";
const OPTIONS = { presenceWindowMs: 3_000, typingWindowMs: 1_000, keyTtlMs: 60_000 };
const started = Date.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function say(who: string, text: string): void {
  const t = ((Date.now() - started) / 1000).toFixed(1).padStart(5);
  console.log(`${t}s  ${who.padEnd(11)} ${text}`);
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

/** One server instance: its own connection, its own sweeper, its own event subscription. */
async function instance(url: string, name: string) {
  const redis = new Redis(url);
  const rollcall = new Rollcall(redis, OPTIONS);
  const sweeper = new Sweeper(rollcall, { intervalMs: 250 });
  sweeper.on("failed", (error) => say(name, `sweep failed: ${error.message}`));
  const subscriber = new Subscriber(rollcall);
  subscriber.on("error", (error) => say(name, `subscriber: ${error.message}`));
  await subscriber.subscribe(ROOM, (event) => say(name, describe(event)));
  sweeper.start();
  return {
    rollcall,
    async close() {
      await sweeper.stop();
      subscriber.close();
      redis.disconnect();
    },
  };
}

async function main(): Promise<void> {
  let embedded: EmbeddedRedis | undefined;
  const url = process.env.REDIS_URL ?? (embedded = await startEmbeddedRedis()).url;
  say("demo", `Redis at ${url}${embedded ? " (embedded)" : ""}; room "${ROOM}"`);
  const east = await instance(url, "[east]");
  const west = await instance(url, "[west]");
  const a = east.rollcall;
  const b = west.rollcall;
  const step = async (text: string, action: () => Promise<unknown>) => {
    say("demo", text);
    await action();
    await sleep(300);
  };
  try {
    await step("ann connects to east", () => a.heartbeat(ROOM, "ann", "ann-laptop"));
    await step("bob connects to west", () =>
      b.heartbeat(ROOM, "bob", "bob-phone", { state: { status: "online", device: "phone" } }),
    );
    await step("ann opens a second tab on west: no event", () =>
      b.heartbeat(ROOM, "ann", "ann-tab2"),
    );
    await step("ann types, then sends her message", async () => {
      await a.startTyping(ROOM, "ann");
      await sleep(400);
      await a.stopTyping(ROOM, "ann");
    });
    await step("bob goes away: one update, no leave and join", () =>
      b.setState(ROOM, "bob", { status: "away", device: "phone" }),
    );
    await step("bob starts typing, and his phone loses the network: no close frame", () =>
      b.startTyping(ROOM, "bob"),
    );
    say("demo", "ann's tabs keep heartbeating; the sweepers notice bob's silence");
    for (let i = 0; i < 8; i++) {
      await a.heartbeat(ROOM, "ann", "ann-laptop");
      await b.heartbeat(ROOM, "ann", "ann-tab2");
      await sleep(500);
    }
    await step("ann closes one tab: still present", () => b.leave(ROOM, "ann", "ann-tab2"));
    await step("ann closes the last one", () => a.leave(ROOM, "ann", "ann-laptop"));
    const roster = await a.roster(ROOM);
    say("demo", `roster now: ${roster.count} members (seq ${roster.seq})`);
  } finally {
    await Promise.all([east.close(), west.close()]);
    await embedded?.stop();
  }
}

await main();
