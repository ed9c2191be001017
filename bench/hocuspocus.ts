// How long a SIGKILLed Hocuspocus instance's user stays visible on the other instance, in real
// time (no test clock): with @hocuspocus/extension-redis alone (its cursor goes at the awareness
// timeout) and with rollcall/hocuspocus beside it (the recommended 10 s window and 2 s grace,
// default heartbeat and sweep on the survivor). One run of each, alone:
//   npx tsx bench/main.ts --only hocuspocus
import { Redis as RedisRelay } from "@hocuspocus/extension-redis";
import { Server } from "@hocuspocus/server";
import { provider, spawnInstance, startInstance } from "../test/kit/hocuspocus.js";
import { eventually } from "../test/kit/wait.js";
import type { Row, Section } from "./section.js";

interface Crash {
  /** SIGKILL to the survivor's provider no longer holding the user's awareness state. */
  awarenessGoneMs: number;
  /** SIGKILL to the survivor's `leave` event (rollcall only). */
  leaveMs: number | null;
  /** Leaves the survivor heard. */
  leaves: number | null;
}

/** A survivor on the Redis at `url`, with rollcall/hocuspocus or with extension-redis alone. */
async function survivor(url: string, withRollcall: boolean) {
  if (withRollcall) return startInstance(url, { presence: {} });
  const { hostname, port } = new URL(url);
  const server = new Server({
    port: 0,
    address: "127.0.0.1",
    quiet: true,
    stopOnSignals: false,
    extensions: [new RedisRelay({ host: hostname, port: +port })],
  });
  await server.listen();
  return { url: `ws://127.0.0.1:${server.address.port}`, stop: () => server.destroy() };
}

async function crash(redisUrl: string, withRollcall: boolean): Promise<Crash> {
  const a = await survivor(redisUrl, withRollcall);
  const b = await spawnInstance(redisUrl);
  const doc = withRollcall ? "with-rollcall" : "relay-only";
  const ann = provider(a.url, doc, "ann");
  ann.setAwarenessField("user", { name: "ann" });
  const bob = provider(b.url, doc, "bob");
  bob.setAwarenessField("user", { name: "bob" });
  const id = bob.document.clientID;
  await eventually(() => ann.awareness!.getStates().has(id), 10_000, "bob's awareness at ann");
  let leaveMs: number | null = null;
  if ("presence" in a) {
    const { presence } = a;
    // B's state mirrored: the survivor knows bob's awareness client.
    await eventually(async () => {
      const { members } = await presence.roster(doc);
      return members.some((m) => m.user === "bob" && m.state !== null);
    }, 10_000);
    presence.on("event", (event) => {
      if (event.type === "leave" && event.user === "bob") leaveMs ??= performance.now() - killed;
    });
  }
  const killed = performance.now();
  b.child.kill("SIGKILL");
  bob.destroy();
  await eventually(() => !ann.awareness!.getStates().has(id), 60_000, "bob's awareness gone");
  const awarenessGoneMs = performance.now() - killed;
  const leaves = "events" in a ? a.events.filter((e) => e.event.type === "leave").length : null;
  ann.destroy();
  await a.stop();
  await b.exited;
  return {
    awarenessGoneMs: Math.round(awarenessGoneMs),
    leaveMs: leaveMs && Math.round(leaveMs),
    leaves,
  };
}

interface HocuspocusResults {
  relayOnly: Crash;
  withRollcall: Crash;
}

const seconds = (ms: number | null) => (ms === null ? "—" : `${(ms / 1_000).toFixed(1)} s`);

/** A SIGKILLed Hocuspocus instance's user, seen from the survivor; one run each, alone. */
export const hocuspocus: Section<null, HocuspocusResults> = {
  name: "hocuspocus",
  alone: true,
  profiles: { full: null, smoke: null },
  steps: () => 2,
  run: async (lab, _, progress) => ({
    relayOnly: await progress.step("hocuspocus: extension-redis alone", () =>
      crash(lab.url, false),
    ),
    withRollcall: await progress.step("hocuspocus: with rollcall/hocuspocus", () =>
      crash(lab.url, true),
    ),
  }),
  rows: ({ relayOnly, withRollcall }): Row[] => [
    { name: "cursor gone, extension-redis alone", value: relayOnly.awarenessGoneMs, unit: "ms" },
    { name: "cursor gone, with rollcall", value: withRollcall.awarenessGoneMs, unit: "ms" },
    ...(withRollcall.leaveMs === null
      ? []
      : [{ name: "leave, with rollcall", value: withRollcall.leaveMs, unit: "ms" }]),
  ],
  report: ({ relayOnly, withRollcall }) =>
    [
      "## Hocuspocus: a SIGKILLed instance's user, seen from the survivor",
      "",
      "@hocuspocus/server 3.4, one run each.",
      "",
      "| survivor runs | kill → cursor gone at the survivor's provider | kill → `leave` | leaves |",
      "| --- | --- | --- | --- |",
      `| extension-redis alone | ${seconds(relayOnly.awarenessGoneMs)} | never | — |`,
      `| extension-redis + rollcall/hocuspocus (10 s window, 2 s grace) | ${seconds(withRollcall.awarenessGoneMs)} | ${seconds(withRollcall.leaveMs)} | ${withRollcall.leaves} |`,
    ].join("\n"),
};
