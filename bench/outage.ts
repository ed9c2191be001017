// How long a call takes to settle while Redis is out, with the client settings docs/operations.md
// gives (REDIS_OPTIONS) and with ioredis's defaults: a heartbeat, a roster and a sweep, each
// started at the same moment (a) against a closed local port, (b) right after redis-server was
// SIGKILLed, (c) while redis-server is SIGSTOPped (continued after `stopMs`). On a redis-server
// of its own, which it kills and stops; alone: npx tsx bench/main.ts --only outage (a few
// minutes: ioredis's defaults wait about 74 s; the smoke run leaves them out).
import { Redis, type RedisOptions } from "ioredis";
import { REDIS_OPTIONS, Rollcall } from "../src/index.js";
import { RedisProcess } from "../test/chaos/server.js";
import { freePort } from "../test/kit/ports.js";
import { table } from "./format.js";
import type { Row, Section } from "./section.js";

const SETTINGS: Record<string, RedisOptions> = {
  "`REDIS_OPTIONS`": REDIS_OPTIONS,
  "ioredis defaults": {},
};
const CALLS = ["heartbeat", "roster", "sweep"] as const;
const SCENARIOS = ["closed port", "killed (SIGKILL)", "stopped"] as const;

type Scenario = (typeof SCENARIOS)[number];

interface Settled {
  ms: number;
  /** The error's code, or `resolved`. */
  how: string;
}

export interface OutageProfile {
  /** How long redis-server stays SIGSTOPped. */
  stopMs: number;
  /** The client settings measured, by name (keys of SETTINGS). */
  settings: string[];
}

/** One scenario under one client setting: how and when each call settled. */
export interface OutageRow {
  redis: string;
  settings: string;
  settled: Settled[];
}

/** Starts the three calls at once; resolves to how and when each settled. */
function settle(rollcall: Rollcall): Promise<Settled[]> {
  const started = performance.now();
  const calls = [
    () => rollcall.heartbeat("room", "ann", "c2"),
    () => rollcall.roster("room"),
    () => rollcall.sweepBucket(rollcall.bucketOf("room")),
  ];
  return Promise.all(
    calls.map((call) =>
      call().then(
        () => ({ ms: performance.now() - started, how: "resolved" }),
        (error: unknown) => ({
          ms: performance.now() - started,
          how: (error as { code?: string }).code ?? String(error),
        }),
      ),
    ),
  );
}

/** A client of these options, its connection errors counted, not printed. */
function connect(url: string, options: RedisOptions): Redis {
  const redis = new Redis(url, { ...options, lazyConnect: false });
  redis.on("error", () => undefined);
  return redis;
}

async function measure(
  server: RedisProcess,
  options: RedisOptions,
  scenario: Scenario,
  stopMs: number,
): Promise<Settled[]> {
  if (scenario === "closed port") {
    const redis = connect(`redis://127.0.0.1:${await freePort()}`, options);
    try {
      return await settle(new Rollcall(redis));
    } finally {
      redis.disconnect();
    }
  }
  const redis = connect(server.url, options);
  try {
    const rollcall = new Rollcall(redis);
    await rollcall.heartbeat("room", "ann", "c1"); // running: ready, scripts loaded
    if (scenario === "killed (SIGKILL)") {
      await server.kill();
      const settled = await settle(rollcall);
      await server.launch();
      return settled;
    }
    server.signal("SIGSTOP");
    const continued = setTimeout(() => server.signal("SIGCONT"), stopMs);
    const settled = await settle(rollcall);
    clearTimeout(continued);
    if (server.stopped) server.signal("SIGCONT");
    return settled.map((s) =>
      s.how === "resolved" && s.ms >= stopMs ? { ...s, how: "resolved at SIGCONT" } : s,
    );
  } finally {
    redis.disconnect();
  }
}

const cell = ({ ms, how }: Settled) => `${(ms / 1000).toFixed(2)} s, ${how}`;

async function benchOutage({ stopMs, settings }: OutageProfile): Promise<OutageRow[]> {
  const server = await RedisProcess.start(false);
  const rows: OutageRow[] = [];
  try {
    for (const name of settings) {
      for (const scenario of SCENARIOS) {
        const settled = await measure(server, SETTINGS[name]!, scenario, stopMs);
        const redis = scenario === "stopped" ? `stopped for ${stopMs / 1000} s` : scenario;
        rows.push({ redis, settings: name, settled });
      }
    }
  } finally {
    await server.stop();
  }
  return rows;
}

/** Calls during a Redis outage, under the documented client settings and ioredis's defaults. */
export const outage: Section<OutageProfile, OutageRow[]> = {
  name: "outage",
  alone: true,
  profiles: {
    full: { stopMs: 30_000, settings: Object.keys(SETTINGS) },
    smoke: { stopMs: 2_000, settings: ["`REDIS_OPTIONS`"] },
  },
  steps: () => 1,
  run: (_lab, profile, progress) => progress.step("outage", () => benchOutage(profile)),
  rows: (rows) =>
    rows.map((row): Row => ({
      name: `slowest call to settle, Redis ${row.redis}, ${row.settings}`,
      value: Math.max(...row.settled.map((s) => s.ms)),
      unit: "ms",
      note: row.settled.map((s) => s.how).join(", "),
    })),
  report: (rows) =>
    [
      "## A Redis outage: how long a call takes to settle",
      "",
      "A heartbeat, a roster and a sweep started at once, on a redis-server of the bench's own.",
      "",
      table(
        ["Redis", "client settings", ...CALLS],
        rows.map((row) => [row.redis, row.settings, ...row.settled.map(cell)]),
      ),
    ].join("\n"),
};
