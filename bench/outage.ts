// How long a call takes to settle while Redis is out, with the client settings docs/operations.md
// gives (REDIS_OPTIONS) and with ioredis's defaults: a heartbeat, a roster and a sweep, each
// started at the same moment (a) against a closed local port, (b) right after redis-server was
// SIGKILLed, (c) while redis-server is SIGSTOPped (continued after --stop-ms). Prints a Markdown
// table (docs/operations.md quotes it). A few minutes: ioredis's defaults wait about 74 s.
//   npx tsx bench/outage.ts [--stop-ms 30000] [--only documented|defaults]
// (documented: REDIS_OPTIONS)
import { parseArgs } from "node:util";
import { Redis, type RedisOptions } from "ioredis";
import { REDIS_OPTIONS, Rollcall } from "../src/index.js";
import { RedisProcess } from "../test/chaos/server.js";
import { freePort } from "../test/kit/ports.js";

const PROFILES: Record<string, RedisOptions> = {
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

const { values } = parseArgs({
  options: { "stop-ms": { type: "string", default: "30000" }, only: { type: "string" } },
});
const stopMs = Number(values["stop-ms"]);

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

const server = await RedisProcess.start(false);
const rows: string[] = [];
try {
  for (const [profile, options] of Object.entries(PROFILES)) {
    const name = options === REDIS_OPTIONS ? "documented" : "defaults";
    if (values.only !== undefined && values.only !== name) continue;
    for (const scenario of SCENARIOS) {
      const settled = await measure(server, options, scenario);
      const what = scenario === "stopped" ? `stopped for ${stopMs / 1000} s` : scenario;
      rows.push(`| ${what} | ${profile} | ${settled.map(cell).join(" | ")} |`);
      console.error(rows.at(-1));
    }
  }
} finally {
  await server.stop();
}
console.log(`| Redis | client settings | ${CALLS.join(" | ")} |`);
console.log(`| --- | --- | ${CALLS.map(() => "---").join(" | ")} |`);
for (const row of rows) console.log(row);
