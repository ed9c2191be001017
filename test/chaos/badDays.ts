/**
 * Redis's bad days: for each condition, a fleet of writer processes (fleet.ts; half of them
 * heartbeat with heartbeatMany, half with heartbeat), sweeper processes, and a log consumer, a
 * subscriber and a RoomWatch per room in the runner, against a redis-server the runner starts.
 * Steady, then the condition, then recovery and quiet; then what the condition did to presence
 * (see measure.ts), each scenario checked against what the fixes of its condition promise.
 *
 *   tsx test/chaos/badDays.ts [--profile smoke|full] [--scenarios a,b] [--seed S]
 *
 * Exits 1 when a promise of a scenario run does not hold, 2 when the run itself failed. The full
 * profile writes its table into results.md.
 */
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { Rollcall, Sweeper, type RollcallOptions } from "../../src/index.js";
import { table } from "../kit/audit.js";
import { newSeed, Random } from "../kit/random.js";
import { eventually, sleep } from "../kit/wait.js";
import { Child } from "./children.js";
import type { ChildConfig, ChildMessage, FleetConfig, FleetCounts } from "./ipc.js";
import { measure, ReplicaSampler, type Hold, type Measures, type Recorded } from "./measure.js";
import { converged, Observers, quiet, Tally, until } from "./observers.js";
import { saveSection } from "./report.js";
import { RedisProcess } from "./server.js";

interface Profile {
  writers: number;
  sweepers: number;
  /** Connections each writer holds. */
  holds: number;
  rooms: number;
  windowMs: number;
  /** The SIGSTOP scenario's presence window: the default (45 s) in the full run. */
  sigstopWindowMs: number;
  /** How many beats (a third of a presence window each) a memory limit or a failing bucket lasts. */
  conditionBeats: number;
  /** Keys written before the restart, so that Redis has an AOF to load for a while. */
  fillerKeys: number;
}

const PROFILES: Record<string, Profile> = {
  smoke: {
    writers: 2,
    sweepers: 2,
    holds: 40,
    rooms: 8,
    windowMs: 2_000,
    sigstopWindowMs: 2_000,
    conditionBeats: 4,
    fillerKeys: 50_000,
  },
  full: {
    writers: 4,
    sweepers: 2,
    holds: 60,
    rooms: 12,
    windowMs: 6_000,
    sigstopWindowMs: 45_000,
    conditionBeats: 12,
    fillerKeys: 1_000_000,
  },
};

/** Beats of steady traffic before the condition, and of recovery after it (over a window). */
const STEADY_BEATS = 1;
const RECOVERY_BEATS = 4;
/** A stall (pause, SIGSTOP, Redis down) lasts this many presence windows. */
const STALL = 4 / 3;
const CHURN = 0.5;
const LEAVING = 0.7;
const STATE_BYTES = 800;

/** A promise of the fixes: a figure that must be 0. */
interface Check {
  row: string;
  value: (m: Measures) => number;
}

const CHECKS = {
  liveLeaves: { row: "leaves of live clients", value: (m) => m.liveLeaves },
  lost: {
    row: "members lost unannounced",
    value: (m) => m.lostByEvents + m.lostByReplicas,
  },
  lostByReplicas: { row: "members lost unannounced by replicas", value: (m) => m.lostByReplicas },
  syncedAtEnd: {
    row: "replicas synced but unlike roster() at the end",
    value: (m) => m.synced.end,
  },
  unreported: { row: "unreported joins", value: (m) => m.unreportedJoins },
  refusedNotOom: {
    row: "refusals but a heartbeat's REDIS_OOM",
    value: (m) => m.refused.total - (m.refused.counts.get("heartbeat REDIS_OOM") ?? 0),
  },
  sweeps: { row: "failed sweeps", value: (m) => m.sweepsFailed.total },
  reads: { row: "failed reads", value: (m) => m.readsFailed.total },
  quiet: { row: "members left in Redis at the end", value: (m) => m.leftInRedis },
  unhandled: { row: "unhandled rejections", value: (m) => m.unhandled },
} satisfies Record<string, Check>;

type Name =
  "noeviction" | "volatile-lru" | "allkeys-lru" | "pause" | "sigstop" | "restart" | "bucket-down";

interface Scenario {
  name: Name;
  /** Redis with `appendonly yes`, `appendfsync always`; otherwise no persistence. */
  durable: boolean;
  /** The event log on (an observer that misses nothing), or off. */
  log: boolean;
  windowMs: (profile: Profile) => number;
  /** Brings the condition about, holds it, ends it; says what it was. */
  condition: (run: Run) => Promise<string>;
  /** The figures its fixes promise to keep at 0 (unhandled rejections: always). */
  promises: Check[];
}

const stallMs = (run: Run) => Math.round(run.engine.presenceWindowMs! * STALL);
const seconds = (ms: number) => `${(ms / 1_000).toFixed(1)} s`;
const kb = (bytes: number) => `${Math.round(bytes / 1_024)} KB`;

/**
 * Redis at maxmemory under `policy`, the limit set once the fleet is in: the least Redis used
 * over a beat, less `below` of the working set (the deployment's keys: Redis's own dataset figure
 * counts the Lua VM too); then churn for a while, then no limit.
 */
function memory(policy: string, below: number) {
  return async (run: Run) => {
    const keys = await run.workingSet();
    let used = Infinity;
    for (const until = performance.now() + run.beatMs; performance.now() < until; await sleep(50)) {
      used = Math.min(used, Number((await run.info("memory")).used_memory));
    }
    const limit = used - Math.round(keys * below);
    await run.admin.config("SET", "maxmemory-policy", policy);
    await run.admin.config("SET", "maxmemory", String(limit));
    await run.beats(run.profile.conditionBeats);
    const evicted = (await run.info("stats")).evicted_keys;
    await run.admin.config("SET", "maxmemory", "0");
    return `maxmemory ${kb(limit)}: least used ${kb(used)} less ${below * 100}% of the keys' ${kb(keys)}, for ${run.profile.conditionBeats} beats; ${evicted} keys evicted`;
  };
}

const SCENARIOS: Scenario[] = [
  {
    name: "noeviction",
    durable: false,
    log: false,
    windowMs: (p) => p.windowMs,
    condition: memory("noeviction", 0.02),
    promises: [
      CHECKS.lost,
      CHECKS.unreported,
      CHECKS.refusedNotOom,
      CHECKS.sweeps,
      CHECKS.reads,
      CHECKS.syncedAtEnd,
      CHECKS.quiet,
    ],
  },
  {
    name: "volatile-lru",
    durable: false,
    log: false,
    windowMs: (p) => p.windowMs,
    condition: memory("volatile-lru", 0.15),
    promises: [CHECKS.lostByReplicas, CHECKS.syncedAtEnd, CHECKS.unreported],
  },
  {
    name: "allkeys-lru",
    durable: false,
    log: false,
    windowMs: (p) => p.windowMs,
    condition: memory("allkeys-lru", 0.15),
    promises: [CHECKS.lostByReplicas, CHECKS.syncedAtEnd, CHECKS.unreported],
  },
  {
    name: "pause",
    durable: false,
    log: true,
    windowMs: (p) => p.windowMs,
    condition: async (run) => {
      const ms = stallMs(run);
      await run.admin.call("CLIENT", "PAUSE", ms, "ALL");
      await run.probe.ping(); // paused too: answered once the pause is over
      return `CLIENT PAUSE ${seconds(ms)} ALL`;
    },
    promises: [CHECKS.liveLeaves, CHECKS.lost, CHECKS.unreported, CHECKS.syncedAtEnd, CHECKS.quiet],
  },
  {
    name: "sigstop",
    durable: false,
    log: true,
    windowMs: (p) => p.sigstopWindowMs,
    condition: async (run) => {
      const ms = stallMs(run);
      run.server.signal("SIGSTOP");
      await sleep(ms);
      run.server.signal("SIGCONT");
      await run.probe.ping();
      return `SIGSTOP of redis-server for ${seconds(ms)}`;
    },
    promises: [CHECKS.liveLeaves, CHECKS.lost, CHECKS.unreported, CHECKS.syncedAtEnd, CHECKS.quiet],
  },
  {
    name: "restart",
    durable: true,
    log: true,
    windowMs: (p) => p.windowMs,
    condition: async (run) => {
      const keys = run.profile.fillerKeys;
      for (let at = 0; at < keys; at += 1_000) {
        const batch = Array.from({ length: Math.min(1_000, keys - at) }, (_, i) => [
          `filler:${at + i}`,
          "x".repeat(32),
        ]);
        await run.admin.mset(...batch.flat());
      }
      const ms = stallMs(run);
      await run.server.kill();
      await sleep(ms);
      const started = performance.now();
      await run.server.launch(); // answers once its AOF is loaded
      const back = performance.now() - started;
      return `SIGKILL, ${seconds(ms)} down, then ${seconds(back)} to start and load ${keys} filler keys (appendonly, fsync always)`;
    },
    promises: [CHECKS.liveLeaves, CHECKS.lost, CHECKS.unreported, CHECKS.syncedAtEnd, CHECKS.quiet],
  },
  {
    name: "bucket-down",
    durable: false,
    log: true,
    windowMs: (p) => p.windowMs,
    condition: async (run) => {
      const { layout } = run.rc;
      const bucket = run.rc.bucketOf(run.rooms[0]!);
      const rooms = run.rooms.filter((room) => run.rc.bucketOf(room) === bucket);
      // Every key but the bucket's ('{prefix:b}…'): its calls fail (NOPERM) before they run.
      if (layout.buckets > 10) throw new Error("the ACL pattern takes single-digit buckets");
      const others = `~{${layout.prefix}:[^${bucket}]}*`;
      await run.admin.call("ACL", "SETUSER", "default", "resetkeys", `~${layout.prefix}:*`, others);
      // Until users joined elsewhere meanwhile: a batch holding one fails in today's heartbeatMany.
      const since = run.observers.pubsub.length;
      const goal = 2 * run.profile.writers;
      const joined = () =>
        run.observers.pubsub
          .slice(since)
          .filter((e) => e.type === "join" && run.rc.bucketOf(e.room) !== bucket).length;
      await run.beats(run.profile.conditionBeats);
      await eventually(() => joined() >= goal, 60_000, `${goal} joins in the other buckets`);
      await run.admin.call("ACL", "SETUSER", "default", "~*");
      return `bucket ${bucket} (${rooms.join(", ")}) refused by ACL while ${joined()} users joined in the others`;
    },
    promises: [CHECKS.unreported, CHECKS.lost, CHECKS.syncedAtEnd, CHECKS.quiet],
  },
];

/** One scenario's redis-server, fleet, sweepers and observers. */
class Run implements Recorded {
  readonly engine: RollcallOptions;
  readonly rooms: string[];
  readonly server: RedisProcess;
  readonly rc: Rollcall;
  readonly admin: Redis;
  /** A connection that only waits for Redis to answer again. */
  readonly probe: Redis;
  readonly observers: Observers;
  readonly sampler: ReplicaSampler;
  private readonly connections: Redis[] = [];
  private readonly sweepers: Sweeper[] = [];
  private readonly beatsOf: number[] = [];
  readonly holds = new Map<string, Hold>();
  readonly reported = new Set<string>();
  readonly refused = new Tally();
  readonly sweepsFailed = new Tally();
  answered = 0;
  joinsReported = 0;
  childUnhandled: string[] = [];

  constructor(
    readonly scenario: Scenario,
    readonly profile: Profile,
    server: RedisProcess,
    /** The fleet writer processes, serving one run per scenario. */
    private readonly writers: readonly Child[],
  ) {
    this.server = server;
    this.engine = {
      prefix: "chaos",
      buckets: 8,
      presenceWindowMs: scenario.windowMs(profile),
      typingWindowMs: 500,
      keyTtlMs: 600_000, // far above any stall: no key expires of its own in a run
      leaveGraceMs: 0, // every expiry is a leave: a grace would hide those a beat cancels
      logLength: scenario.log ? 100_000 : 0, // nothing trimmed in a run
    };
    this.rooms = Array.from({ length: profile.rooms }, (_, i) => `room${i}`);
    this.rc = new Rollcall(this.connect(), this.engine);
    this.admin = this.connect();
    this.probe = this.connect();
    const instance = () => new Rollcall(this.connect(), this.engine);
    this.observers = new Observers(instance(), instance(), instance(), this.rooms);
    this.sampler = new ReplicaSampler(this.rc, this.observers.watches);
  }

  get log(): boolean {
    return this.scenario.log;
  }

  get beatMs(): number {
    return Math.floor(this.engine.presenceWindowMs! / 3); // a gateway's default
  }

  connect(): Redis {
    const redis = new Redis(this.server.url);
    redis.on("error", () => undefined); // outages are the point; calls report their failures
    this.connections.push(redis);
    return redis;
  }

  async info(section: string): Promise<Record<string, string>> {
    const text = await this.admin.info(section);
    return Object.fromEntries(
      text
        .split("\r\n")
        .filter((line) => line.includes(":"))
        .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1)]),
    );
  }

  /**
   * What the keys in Redis take (MEMORY USAGE of each), read on a connection of its own, closed
   * after: the buffers of its burst of commands go with it.
   */
  async workingSet(): Promise<number> {
    const redis = new Redis(this.server.url);
    let bytes = 0;
    let cursor = "0";
    try {
      do {
        const [next, keys] = await redis.scan(cursor, "COUNT", 1_000);
        const usage = keys.map((key) => redis.call("MEMORY", "USAGE", key));
        for (const b of await Promise.all(usage)) bytes += Number(b);
        cursor = next;
      } while (cursor !== "0");
    } finally {
      redis.disconnect();
    }
    return bytes;
  }

  async start(rng: Random): Promise<void> {
    await this.rc.ready();
    await this.observers.start();
    for (let i = 0; i < this.profile.sweepers; i++) {
      const sweeper = new Sweeper(new Rollcall(this.connect(), this.engine), {
        intervalMs: 200,
        maxBackoffMs: 1_000,
      });
      sweeper.on("failed", (error) => this.sweepsFailed.add(error.code));
      sweeper.start();
      this.sweepers.push(sweeper);
    }
    this.writers.forEach((writer, i) => {
      this.beatsOf.push(0);
      const config: ChildConfig = {
        url: this.server.url,
        engine: this.engine,
        seed: rng.fork().seed,
        rooms: this.rooms,
        users: [],
        fleet: this.fleet(i),
      };
      writer.run(config, (message) => this.onMessage(message, i));
    });
  }

  private fleet(i: number): FleetConfig {
    return {
      name: `w${i}`,
      batch: i % 2 === 0,
      holds: this.profile.holds,
      beatMs: this.beatMs,
      churn: CHURN,
      leaving: LEAVING,
      stateBytes: STATE_BYTES,
    };
  }

  private onMessage(message: ChildMessage, writer: number): void {
    const counts = (c: FleetCounts) => {
      this.answered += c.answered;
      this.refused.addAll(c.refused);
    };
    switch (message.type) {
      case "beat":
        this.beatsOf[writer]!++;
        counts(message);
        break;
      case "done":
        counts(message);
        break;
      case "joined":
        this.joinsReported++;
        this.reported.add(`${message.epoch}/${message.room}/${message.seq}`);
        break;
      case "held":
        this.holds.set(`${message.room}/${message.user}`, message);
        break;
      case "unhandled":
        this.childUnhandled.push(message.message);
        break;
    }
  }

  /** Until every writer has sent `n` more beats. */
  async beats(n: number): Promise<void> {
    const goal = this.beatsOf.map((b) => b + n);
    const bound = n * this.beatMs * 4 + 60_000;
    await eventually(() => this.beatsOf.every((b, i) => b >= goal[i]!), bound, `${n} beats`);
  }

  /** Until the fleet's calls have reported as many joins as it holds connections. */
  async joined(): Promise<void> {
    const goal = this.profile.writers * this.profile.holds;
    await eventually(() => this.joinsReported >= goal, 60_000, `${goal} joins reported`);
  }

  /**
   * The writers leave and stop; then (each within a bound) every room empties, the replicas
   * catch up and the log consumer has read everything.
   */
  async quiet(problems: string[]): Promise<void> {
    await Promise.all(this.writers.map((w) => w.finish()));
    const window = this.engine.presenceWindowMs!;
    const empty = await until(() => quiet(this.rc, this.rooms), window + 5_000);
    if (empty) problems.push(`never quiet: ${empty}`);
    const settled = await until(() => converged(this.rc, this.observers.watches), 10_000);
    if (settled) problems.push(`replicas did not converge: ${settled}`);
    const unread = await until(() => this.observers.drained(this.rc), 10_000);
    if (unread) problems.push(unread);
  }

  async stop(): Promise<void> {
    await Promise.all(this.writers.map((w) => w.finish()));
    await Promise.all(this.sweepers.map((s) => s.stop()));
    await this.observers.stop();
    this.connections.forEach((c) => c.disconnect());
    await this.server.stop();
  }
}

interface Outcome {
  scenario: Scenario;
  condition: string;
  measures: Measures;
  failed: string[];
  seconds: number;
}

async function runScenario(
  scenario: Scenario,
  profile: Profile,
  writers: readonly Child[],
  rng: Random,
): Promise<Outcome> {
  const started = performance.now();
  const run = new Run(scenario, profile, await RedisProcess.start(scenario.durable), writers);
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on("unhandledRejection", onUnhandled);
  const problems: string[] = [];
  try {
    await run.start(rng);
    await run.joined();
    await run.beats(STEADY_BEATS);
    run.sampler.start(Math.min(500, run.beatMs));
    const condition = await scenario.condition(run);
    run.sampler.phase = "after";
    await run.beats(RECOVERY_BEATS);
    await run.quiet(problems);
    await run.sampler.stop();
    const measures = await measure(run, problems);
    measures.unhandled = unhandled + run.childUnhandled.length;
    problems.push(...run.childUnhandled.map((m) => `a child's unhandled rejection: ${m}`));
    if (unhandled > 0) problems.push(`${unhandled} unhandled rejections in the runner`);
    const failed = [...scenario.promises, CHECKS.unhandled]
      .filter((check) => check.value(measures) > 0)
      .map((check) => check.row);
    return { scenario, condition, measures, failed, seconds: (performance.now() - started) / 1e3 };
  } finally {
    await run.sampler.stop();
    await run.stop();
    process.off("unhandledRejection", onUnhandled);
  }
}

function row(o: Outcome): Record<string, string | number> {
  const m = o.measures;
  const s = m.synced;
  return {
    scenario: `\`${o.scenario.name}\``,
    condition: o.condition,
    "heartbeats answered": m.answered,
    "joins / leaves": `${m.joins} / ${m.leaves}`,
    "leaves of live clients": m.liveLeaves,
    "lost unannounced (events / replicas)": `${m.lostByEvents} / ${m.lostByReplicas}`,
    "replicas synced ≠ roster(): samples during / after (of all), longest; rooms at the end": `${s.during} / ${s.after} (${s.samples}), ${seconds(s.longestMs)}; ${s.end}`,
    "unreported joins": m.unreportedJoins,
    "left in Redis at the end": m.leftInRedis,
    "calls refused": String(m.refused),
    "sweeps, reads failed": `${String(m.sweepsFailed)}; ${String(m.readsFailed)}`,
    promises: o.failed.length === 0 ? "hold" : `**fail**: ${o.failed.join(", ")}`,
  };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      profile: { type: "string", default: "smoke" },
      scenarios: { type: "string" },
      seed: { type: "string" },
    },
  });
  const profile = PROFILES[values.profile];
  if (!profile) throw new Error(`unknown profile ${values.profile}: smoke or full`);
  const names =
    values.scenarios?.split(",").filter((n) => n !== "") ?? SCENARIOS.map((s) => s.name);
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) {
    throw new Error(
      `unknown scenarios ${unknown.join(", ")}: ${SCENARIOS.map((s) => s.name).join(", ")}`,
    );
  }
  const seed = values.seed === undefined ? newSeed() : Number(values.seed);
  const replay = `tsx test/chaos/badDays.ts --profile ${values.profile} --seed ${seed}`;
  console.log(
    `bad days: profile ${values.profile}, seed ${seed} (replay: ${replay} --scenarios ${names.join(",")})`,
  );

  // Each scenario draws from its own generator, forked in a fixed order: one replays alone.
  const rng = new Random(seed);
  const outcomes: Outcome[] = [];
  // The writer processes serve every scenario (a process's start costs a second or two).
  const writers: Child[] = [];
  try {
    for (const scenario of SCENARIOS) {
      const own = rng.fork();
      if (!names.includes(scenario.name)) continue;
      console.log(`scenario ${scenario.name}...`);
      for (let i = 0; i < profile.writers; i++) {
        if (writers[i]?.alive !== true) writers[i] = new Child("fleet", null, () => undefined);
      }
      await Promise.all(writers.map((w) => w.ready));
      const outcome = await runScenario(scenario, profile, writers, own);
      console.log(`  ${outcome.condition}; ${Math.round(outcome.seconds)} s`);
      for (const problem of outcome.measures.problems) console.log(`  ${problem}`);
      outcomes.push(outcome);
    }
  } finally {
    await Promise.all(writers.map((w) => w.close()));
  }
  const summary = table(outcomes.map(row));
  console.log(`\n${summary}\n`);
  const failing = outcomes.filter((o) => o.failed.length > 0).map((o) => o.scenario.name);
  console.log(
    failing.length > 0
      ? `promises broken in ${failing.join(", ")} (seed ${seed})`
      : `every promise holds (seed ${seed})`,
  );
  if (values.profile === "full") {
    const path = await saveSection("bad-days", describe(profile, seed, replay, summary, outcomes));
    console.log(`table saved to ${path}`);
  }
  return failing.length > 0 ? 1 : 0;
}

/** The commit the run measured (`-dirty`: with uncommitted changes), when in a git checkout. */
function tree(): string {
  try {
    const described = execFileSync("git", ["describe", "--always", "--dirty"], { stdio: "pipe" });
    return `commit ${described.toString().trim()}`;
  } catch {
    return "outside a git checkout";
  }
}

function describe(
  profile: Profile,
  seed: number,
  replay: string,
  summary: string,
  outcomes: readonly Outcome[],
): string {
  const promises = SCENARIOS.map(
    (s) => `\`${s.name}\`: ${[...s.promises, CHECKS.unhandled].map((c) => c.row).join(", ")}`,
  );
  return [
    "## Redis's bad days (`make chaos`)",
    "",
    `Profile full, seed ${seed}, ${tree()}: \`${replay}\` (one scenario: add ` +
      `\`--scenarios NAME\`). Per ` +
      `scenario, a redis-server of its own; ${profile.writers} fleet writer processes (half ` +
      `batching every beat in one \`heartbeatMany\`, half calling \`heartbeat\` per connection), ` +
      `${profile.holds} connections each (a user each, joining with a ${STATE_BYTES}-byte state), ` +
      `one in two beats replacing one (${LEAVING * 100}% leave, the others go silent and expire); ` +
      `${profile.sweepers} Sweepers, a subscriber, a log consumer (when the log is on) ` +
      `and a RoomWatch per room in the runner; ${profile.rooms} rooms in 8 buckets. Presence ` +
      `window ${seconds(profile.windowMs)} (\`sigstop\`: ${seconds(profile.sigstopWindowMs)}), ` +
      `a beat a third of it, leave grace 0 (every expiry is a leave), key TTL 10 min. Steady ` +
      `until every connection joined and ${STEADY_BEATS} beats more, then the condition, then ` +
      `${RECOVERY_BEATS} beats of recovery, then quiet: the writers leave, the sweepers empty ` +
      `every room, the replicas converge (each within a bound). The memory scenarios run with ` +
      `the log off (its size is a fixed bound in a deployment, and an untrimmed log in a short ` +
      `run would be growth no deployment has); the others with it on.`,
    "",
    summary,
    "",
    `${outcomes.reduce((s, o) => s + Math.round(o.seconds), 0)} s in all.`,
    "",
    "- _leaves of live clients_: leave events (log or pub/sub) of a user whose writer was still",
    "  heartbeating its connection (every beat sent, answered or not) when Redis published it.",
    "- _lost unannounced_: members present by the events (the log when on, else pub/sub: a join and",
    "  no leave since) or listed by a replica at the end, whom `roster()` no longer lists.",
    "- _replicas synced ≠ roster()_: samples (each room every half second) in which a RoomWatch",
    "  claiming `synced` listed other members than `roster()` at the same seq, or, `roster()` having",
    "  moved on, stayed unchanged for a second while `roster()` listed the same other members:",
    "  during the condition and after it (of all samples of synced replicas), the longest a replica",
    "  stayed so, and the rooms whose replica does at the end (after quiet).",
    "- _unreported joins_: join events (log or pub/sub) that no writer's call reported as `joined`.",
    "- _left in Redis at the end_: members `roster()` still lists once every writer left and a",
    "  presence window (and 5 s) passed: nobody will announce them before their keys expire.",
    "- _calls refused_: writers' heartbeat entries and leaves that failed, by error code; _sweeps,",
    "  reads failed_: sweeper passes, and the runner's `roster()` reads and its observers' errors.",
    "- _promises_: what the fixes of each condition promise (all 0):",
    ...promises.map((p) => `  - ${p}`),
    "",
  ].join("\n");
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(2);
  },
);
