/**
 * The chaos runner: writer and sweeper processes against one redis-server, a log consumer, a
 * subscriber and RoomWatch replicas here, and faults drawn from a seeded PRNG (kills of writers and
 * sweepers, CLIENT KILL, CLIENT PAUSE, SCRIPT FLUSH, SIGSTOP of Redis, Redis restarts). Then quiet,
 * and the invariant checker over everything recorded. Exits non-zero on any violation.
 *
 *   tsx test/chaos/main.ts [--profile smoke|full] [--seconds N] [--seed S]
 *
 * Each profile runs two phases: Redis with `appendonly yes`, `appendfsync always` (a restart loses
 * nothing, so no acknowledged write may be missing), then Redis with no persistence (a restart
 * loses everything: the loss must show up as a new epoch, never as a violation).
 */
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { Rollcall, type RollcallOptions } from "../../src/index.js";
import { checkStatus, type CallRecord, type StatusReport } from "../kit/invariants.js";
import { audit, explain, table, type Audit, type AuditViolation } from "../kit/audit.js";
import { Child } from "./children.js";
import type { ChildMessage } from "./ipc.js";
import { converged, Observers, quiet, Tally, until } from "./observers.js";
import { newSeed, Random } from "../kit/random.js";
import { saveSection } from "./report.js";
import { RedisProcess } from "./server.js";
import { StatusFollower, statusEnd, statusSettled } from "./statuses.js";
import { eventually, sleep } from "../kit/wait.js";

type Fault =
  | "kill-writer"
  | "kill-sweeper"
  | "client-kill"
  | "client-pause"
  | "script-flush"
  | "sigstop"
  | "restart";

/** How often each fault is drawn, after each has been injected once. */
const WEIGHTS: Record<Fault, number> = {
  "kill-writer": 3,
  "kill-sweeper": 3,
  "client-kill": 4,
  "client-pause": 2,
  "script-flush": 2,
  sigstop: 2,
  restart: 1,
};
const FAULTS = Object.keys(WEIGHTS) as Fault[];

interface Phase {
  name: string;
  durable: boolean;
  seconds: number;
}

interface Profile {
  phases: Phase[];
  writers: number;
  sweepers: number;
  /** Traffic between two faults: calls answered, drawn in this range. */
  gapCalls: [number, number];
}

const PROFILES: Record<string, (seconds?: number) => Profile> = {
  smoke: (seconds = 8) => ({
    phases: [
      { name: "durable", durable: true, seconds },
      { name: "volatile", durable: false, seconds: Math.max(4, Math.round(seconds / 2)) },
    ],
    writers: 3,
    sweepers: 2,
    gapCalls: [50, 200],
  }),
  full: (seconds = 150) => ({
    phases: [
      { name: "durable", durable: true, seconds },
      { name: "volatile", durable: false, seconds: Math.max(10, Math.round(seconds / 3)) },
    ],
    writers: 4,
    sweepers: 3,
    gapCalls: [100, 500],
  }),
};

const ENGINE: RollcallOptions = {
  prefix: "chaos",
  buckets: 8,
  presenceWindowMs: 2_000,
  typingWindowMs: 500,
  keyTtlMs: 60_000,
  leaveGraceMs: 1_000,
  logLength: 100_000, // nothing trimmed in a run
  userStatus: true, // the users' status transitions are checked too
};
const ROOMS = Array.from({ length: 8 }, (_, i) => `room${i}`);
const USERS = Array.from({ length: 8 }, (_, i) => `u${i}`);
/** Users who come and go (see ChildConfig): their status goes online and offline. */
const VISITORS = Array.from({ length: 32 }, (_, i) => `v${i}`);
const EVERYONE = [...USERS, ...VISITORS];
const log = (line: string) => console.log(line);

interface PhaseResult {
  phase: Phase;
  audit: Audit;
  /** The users' status transitions against the rooms' events and the settled end. */
  status: StatusReport;
  /** Problems found outside the record: replicas that did not converge, rooms left behind. */
  problems: string[];
  stats: Record<string, number | string>;
}

async function runPhase(phase: Phase, profile: Profile, rng: Random): Promise<PhaseResult> {
  const started = Date.now();
  const server = await RedisProcess.start(phase.durable);
  const connections: Redis[] = [];
  const connect = () => {
    const redis = new Redis(server.url);
    redis.on("error", () => undefined); // outages are the point; calls report their failures
    connections.push(redis);
    return redis;
  };
  const rc = new Rollcall(connect(), ENGINE);
  await rc.ready();
  const admin = connect();
  const problems: string[] = [];
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on("unhandledRejection", onUnhandled);
  const counts = {
    failed: 0,
    passes: 0,
    sweptStatuses: 0,
    sweepFailures: 0,
    childUnhandled: 0,
  };
  const injected = Object.fromEntries(FAULTS.map((f) => [f, 0])) as Record<Fault, number>;

  // Observers: the log consumer, a subscriber, a replica of every room.
  const instance = () => new Rollcall(connect(), ENGINE);
  const observers = new Observers(instance(), instance(), instance(), ROOMS);
  await observers.start();
  const { handled, pubsub, watches } = observers;
  const follower = new StatusFollower(rc, connect(), ROOMS);
  await follower.start();

  // Writers and sweepers, each its own process.
  const calls: CallRecord[] = [];
  /** Until the writers have had `n` more calls answered. */
  const answered = async (n: number) => {
    const goal = calls.length + n;
    await eventually(() => calls.length >= goal, 60_000, `${n} more calls answered`);
  };
  const onMessage = (message: ChildMessage) => {
    switch (message.type) {
      case "call":
        calls.push(message.call);
        break;
      case "failed":
        counts.failed++;
        break;
      case "pass":
        if (message.leaves + message.typingStops > 0) counts.passes++;
        counts.sweptStatuses += message.statusChanges;
        break;
      case "sweep-failed":
        counts.sweepFailures++;
        break;
      case "unhandled":
        counts.childUnhandled++;
        problems.push(`a child's unhandled rejection: ${message.message}`);
        break;
    }
  };
  const spawn = (role: Child["role"]) =>
    new Child(
      role,
      {
        url: server.url,
        engine: ENGINE,
        seed: rng.fork().seed,
        rooms: ROOMS,
        users: USERS,
        visitors: VISITORS,
      },
      onMessage,
    );
  const writers = Array.from({ length: profile.writers }, () => spawn("writer"));
  const sweepers = Array.from({ length: profile.sweepers }, () => spawn("sweeper"));
  await Promise.all([...writers, ...sweepers].map((c) => c.ready));

  // Faults: each kind once (in a seeded order, even past the time), then drawn by weight.
  const inject = async (fault: Fault) => {
    injected[fault]++;
    switch (fault) {
      case "kill-writer":
      case "kill-sweeper": {
        const pool = fault === "kill-writer" ? writers : sweepers;
        const i = rng.int(0, pool.length - 1);
        await pool[i]!.kill();
        await answered(rng.int(30, 120)); // traffic while it is down
        pool[i] = spawn(pool[i]!.role);
        await pool[i].ready;
        break;
      }
      case "client-kill": {
        const own = Number(await admin.call("CLIENT", "ID"));
        const ids = String(await admin.call("CLIENT", "LIST"))
          .split("\n")
          .map((line) => Number(/^id=(\d+)/.exec(line)?.[1]))
          .filter((id) => id > 0 && id !== own);
        for (let n = rng.int(1, 3); n > 0 && ids.length > 0; n--) {
          const [id] = ids.splice(rng.int(0, ids.length - 1), 1);
          await admin.call("CLIENT", "KILL", "ID", id!).catch(() => undefined);
        }
        break;
      }
      case "client-pause": {
        await admin.call("CLIENT", "PAUSE", rng.int(100, 800), rng.pick(["ALL", "WRITE"]));
        await admin.publish("chaos:pause", "over"); // paused in either mode: answered at the end
        break;
      }
      case "script-flush":
        await admin.call("SCRIPT", "FLUSH");
        break;
      case "sigstop":
        server.signal("SIGSTOP");
        await sleep(rng.int(200, 1_500));
        server.signal("SIGCONT");
        break;
      case "restart":
        await server.restart();
        break;
    }
  };
  const firsts = [...FAULTS];
  const faultsUntil = Date.now() + phase.seconds * 1_000;
  while (Date.now() < faultsUntil || firsts.length > 0) {
    await answered(rng.int(...profile.gapCalls));
    const fault = firsts.length > 0 ? firsts.splice(rng.int(0, firsts.length - 1), 1)[0]! : null;
    await inject(fault ?? rng.weighted(WEIGHTS));
  }
  const faultSeconds = (Date.now() - started) / 1_000;
  await answered(500); // traffic after the last fault, in the epoch it may have started

  // Quiet: writers stop, sweepers expire everything, observers catch up.
  await Promise.all(writers.map((w) => w.stop()));
  const empty = await until(() => quiet(rc, ROOMS), 20_000);
  if (empty) problems.push(`never quiet: ${empty}`);
  const settled = await until(() => converged(rc, watches), 10_000);
  if (settled) problems.push(`replicas did not converge: ${settled}`);
  const drained = await until(() => observers.drained(rc), 10_000);
  if (drained) problems.push(drained);
  const { stored } = observers;
  // Pub/sub delivered each room's last event, or lost it: its losses are measured, not judged.
  await until(() => {
    const seen = new Set(pubsub.map((e) => `${e.epoch}/${e.room}/${e.seq}`));
    const last = new Map(stored.map(({ event: e }) => [e.room, `${e.epoch}/${e.room}/${e.seq}`]));
    const missing = [...last.values()].filter((key) => !seen.has(key)).length;
    return Promise.resolve(
      missing === 0 ? null : `pub/sub lacks the last event of ${missing} rooms`,
    );
  }, 5_000);
  // Users' status: the sweepers drain what the leaves changed, and the follower hears it (or lost
  // it: the users it lost track of are not judged). A status that never settles is judged.
  await until(() => statusSettled(rc, ROOMS, EVERYONE), 10_000);
  await until(() => follower.caughtUp(), 5_000);
  const behind = (await follower.behind()).length;
  const end = await statusEnd(rc, ROOMS, EVERYONE);

  await Promise.all(sweepers.map((s) => s.stop()));
  follower.stop();
  if (follower.errors.total > 0) problems.push(`unreadable messages: ${String(follower.errors)}`);
  await observers.stop();
  connections.forEach((c) => c.disconnect());
  await server.stop();
  process.off("unhandledRejection", onUnhandled);
  if (unhandled > 0) problems.push(`${unhandled} unhandled rejections in the runner`);
  const status = checkStatus(follower.sightings, end);
  const s = status.counts;

  const result = audit({
    handled,
    stored,
    pubsub,
    calls,
    bucketOf: (room) => rc.layout.room(room).bucket,
    lossAllowed: !phase.durable,
  });
  const stats: Record<string, number | string> = {
    "fault period, s": Math.round(faultSeconds),
    "whole phase, s": Math.round((Date.now() - started) / 1_000),
    "calls ok": calls.length,
    "calls failed": counts.failed,
    "events (log)": result.events,
    epochs: result.epochs,
    "pub/sub seen": result.pubsubSeen,
    "pub/sub missed": result.pubsubMissed,
    "pub/sub gaps": result.pubsubGaps,
    "pub/sub duplicates": result.pubsubDuplicates,
    "log duplicates": result.duplicates,
    "log redeliveries": result.redelivered,
    "acked, not in the log at the end": result.lostWrites.length,
    "acked, never logged": result.unlogged,
    "logged, then lost": result.lostFromLog,
    "left present by a loss, room silent since": result.stranded,
    "replica resyncs": resyncsAfterStart(observers.resyncs),
    "sweeper passes with expiries": counts.passes,
    "sweeper passes failed": counts.sweepFailures,
    "status transitions seen": s.online + s.offline,
    "status transitions judged": s.judged,
    "status gaps, connections lost": `${s.gaps}, ${s.losses}`,
    "offline while in a room: online after, lost track": `${s.early}: ${s.repaired}, ${s.untracked}`,
    "offline while in a room, longest, ms": s.longestEarlyMs,
    "users channels behind at the end": behind,
    "users judged at the end": `${s.endJudged} of ${EVERYONE.length}`,
    "status transitions by sweepers": counts.sweptStatuses,
    ...Object.fromEntries(FAULTS.map((f) => [`fault: ${f}`, injected[f]])),
    violations: result.violations.length,
    "status violations": status.violations.length,
    "other problems": problems.length,
  };
  return { phase, audit: result, status, problems, stats };
}

/** The watches' resyncs but their first snapshots, by reason. */
function resyncsAfterStart(resyncs: Tally): string {
  const after = new Tally();
  for (const [reason, n] of resyncs.counts) if (reason !== "start") after.add(reason, n);
  return String(after);
}

function describePhase(phase: Phase): string {
  return phase.durable
    ? `${phase.name} (appendonly, fsync always)`
    : `${phase.name} (no persistence)`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      profile: { type: "string", default: "smoke" },
      seconds: { type: "string" },
      seed: { type: "string" },
    },
  });
  const make = PROFILES[values.profile];
  if (!make) throw new Error(`unknown profile ${values.profile}: smoke or full`);
  const profile = make(values.seconds === undefined ? undefined : Number(values.seconds));
  const seed = values.seed === undefined ? newSeed() : Number(values.seed);
  const replay = `tsx test/chaos/main.ts --profile ${values.profile} --seed ${seed}${values.seconds ? ` --seconds ${values.seconds}` : ""}`;
  log(`chaos: profile ${values.profile}, seed ${seed} (replay: ${replay})`);

  const rng = new Random(seed);
  const results: PhaseResult[] = [];
  for (const phase of profile.phases) {
    log(`phase ${describePhase(phase)}: ${phase.seconds} s of faults...`);
    results.push(await runPhase(phase, profile, rng.fork()));
  }

  const names = results.map((r) => describePhase(r.phase));
  const rows = Object.keys(results[0]!.stats).map((metric) => ({
    metric,
    ...Object.fromEntries(results.map((r, i) => [names[i]!, r.stats[metric] ?? ""])),
  }));
  const summary = table(rows);
  log(`\n${summary}\n`);
  let failed = false;
  for (const r of results) {
    const violations: AuditViolation[] = [...r.audit.violations, ...r.status.violations];
    if (violations.length === 0 && r.problems.length === 0) continue;
    failed = true;
    const rules = new Map<string, number>();
    for (const v of violations) rules.set(v.rule, (rules.get(v.rule) ?? 0) + 1);
    const byRule = [...rules].map(([rule, n]) => `${n} ${rule}`).join(", ");
    log(
      `${describePhase(r.phase)}: ${violations.length} violations${byRule ? ` (${byRule})` : ""}`,
    );
    if (violations.length > 0) log(explain(violations));
    for (const problem of r.problems) log(`  ${problem}`);
  }
  log(failed ? `FAILED (seed ${seed}: ${replay})` : `no violation (seed ${seed})`);

  if (values.profile === "full") {
    const markdown = [
      "# Chaos run (`make chaos`)",
      "",
      `Profile full, seed ${seed}: \`${replay}\`. ${profile.writers} writer and ` +
        `${profile.sweepers} sweeper processes on one redis-server, a log consumer, a subscriber, ` +
        `a RoomWatch per room and a follower of every room's and users channel in the runner; ` +
        `${ROOMS.length} rooms, ${USERS.length} users and ${VISITORS.length} visitors (two rooms ` +
        `each, called on rarely: their status comes and goes), ` +
        `presence window ${ENGINE.presenceWindowMs} ms, typing window ${ENGINE.typingWindowMs} ms, leave grace ${ENGINE.leaveGraceMs} ms.`,
      "",
      summary,
      "",
      failed ? "Result: **violations found** (see the run's output)." : "Result: no violation.",
      "",
      "- _pub/sub missed_: events of the log the subscriber never received (its connection killed,",
      "  Redis restarted or paused); _pub/sub gaps_: holes its chains show (each one a replica resync).",
      "- _acked, not in the log at the end_: calls whose event Redis no longer holds; 0 when durable,",
      "  everything before the last restart without persistence otherwise. _acked, never logged_: of",
      "  those, the ones the log consumer had not handled before the data went.",
      "- _left present by a loss, room silent since_: members the log shows present for good: their",
      "  room's last events went with the data and nothing happened in it since, so no event of a new",
      "  epoch tells a consumer to resync (a limit of epochs, measured, not a violation).",
      "- _violations_: the invariant checker (test/kit/invariants.ts) over the log (complete within",
      "  each epoch), pub/sub and the call results, plus: no number carried by two events, no",
      "  acknowledged write missing without a data-losing fault, every stored entry handled.",
      "- _status_: the users' online and offline transitions, as a follower of every room's channel",
      "  and every users channel heard them on one connection (so in Redis's order). Only what it",
      "  knows is judged: a user's status from a transition on an unbroken chain of their users",
      "  channel, a user's presence in a room from a join on an unbroken chain of the room's (a gap,",
      "  another epoch, a lost connection: unknown until the next one). _judged_: transitions of a",
      "  user whose status it knew, which must alternate. _offline while in a room_: offlines",
      "  published while a room showed the user present, the join's change not yet applied (a",
      "  drain's lag, which faults stretch: measured); each must be followed by an online, unless",
      "  the follower lost track first. _users judged at the end_: once quiet and settled, every",
      "  user's status() is online iff a roster lists them (judged for all), and the last transition",
      "  heard of a user still known agrees. _by sweepers_: transitions made by the Sweepers'",
      "  drains (left behind by a killed writer, or by their own expiries).",
      "",
    ].join("\n");
    const path = await saveSection("faults", markdown);
    log(`table saved to ${path}`);
  }
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(2);
  },
);
