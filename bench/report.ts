import { CEILING_SCRIPTS, summarizeCeiling, type CeilingScript } from "./ceiling.js";
import type { CountsResults } from "./counts.js";
import { rosterSection, type RosterResults } from "./roster.js";
import type { LogResults } from "./eventLog.js";
import type { FanoutResult } from "./fanout.js";
import { gatewaySection, graceSection, logSection } from "./features.js";
import type { GatewayResults } from "./gateway.js";
import type { GraceResults } from "./grace.js";
import { number, percent, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import {
  describe,
  ROUND_TRIP,
  VARIANTS,
  type HeartbeatResults,
  type LatencyResult,
  type Variant,
} from "./heartbeat.js";
import type { LiveResult } from "./live.js";
import type { MemoryResults } from "./memory.js";
import { liveSection, memorySection, sweepSection } from "./resources.js";
import type { Load } from "./stats.js";
import { scaleSection } from "./scale.js";
import { scriptsSection, type ScriptsResults } from "./scripts.js";
import type { SweepResults } from "./sweep.js";
import { best, ceilingOf, type Target } from "./targets.js";

export interface Meta {
  date: string;
  profile: "full" | "smoke";
  redisVersion: string;
  redis: "embedded" | "external";
  nodeVersion: string;
  cores: number;
  cpu: string;
  platform: string;
  seconds: number;
}

export interface Results {
  meta: Meta;
  heartbeat: HeartbeatResults;
  fanout: FanoutResult[];
  gateway: GatewayResults;
  sweep: SweepResults;
  live: LiveResult[];
  memory: MemoryResults;
  counts: CountsResults;
  roster: RosterResults;
  log: LogResults;
  grace: GraceResults;
  scripts: ScriptsResults;
  targets: Target[];
}

const LABEL: Record<LatencyResult["variant"], string> = {
  rollcall: "rollcall (1 EVALSHA)",
  naive: "baseline (ZSCORE, ZADD, EXPIRE)",
  multi: "baseline in MULTI/EXEC",
  [ROUND_TRIP]: "one round trip (PING), for scale",
};

export const SCRIPT_LABEL: Record<CeilingScript, string> = {
  noop: "TIME only",
  naive: "baseline's work scripted",
  rollcall: "rollcall heartbeat",
};

/**
 * What held a run back, from who was busy: a process near a whole core, or the host's cores
 * full (other processes count: the host may be shared), or else neither: each call waited on
 * its round trip.
 */
export function boundBy(load: Load, cores: number): string {
  if (load.redisCpu >= 0.9) return "Redis CPU";
  if (load.clientCpu >= 0.9) return "client CPU (Node)";
  if (load.hostCpu >= 0.9 * cores) return "the host's cores";
  return "round trips";
}

/** Cores the host kept busy, and how many of them went to processes other than these two. */
function hostCell(load: Load, cores: number): string {
  const others = Math.max(0, load.hostCpu - load.redisCpu - load.clientCpu);
  return `${number(load.hostCpu, 2)} of ${cores} (others ${number(others, 2)})`;
}

export function headline(r: Pick<Results, "meta">): string {
  const m = r.meta;
  return (
    `${m.date.slice(0, 10)} · ${m.profile} run · Redis ${m.redisVersion} (${m.redis}) · ` +
    `Node ${m.nodeVersion} · ${m.cores} cores (${m.cpu}, ${m.platform}) · ${m.seconds} s`
  );
}

function heartbeatSection(r: Results): string {
  const h = r.heartbeat;
  const { rooms, usersPerRoom } = h.population;
  const configs = [...new Set(h.throughput.map(describe))];
  const runOf = (variant: Variant, config: string) =>
    h.throughput
      .filter((t) => t.variant === variant && describe(t) === config)
      .reduce((a, b) => (b.opsPerSec > a.opsPerSec ? b : a));
  return [
    "## Heartbeat",
    "",
    `Steady state: ${number(rooms * usersPerRoom)} users already present in ${number(rooms)} ` +
      `rooms of ${usersPerRoom}, one connection each; every measured heartbeat is a refresh ` +
      "(the bench fails if one joins).",
    "",
    "### Latency, one sequential client (µs, call to reply)",
    "",
    "Each variant has its own connection; rounds alternate the variants so that drift on the " +
      "host hits them alike. A PING on the same kind of connection shows what one round trip " +
      "costs here, before any work.",
    "",
    table(
      ["variant", ...PERCENTILES, "samples"],
      h.latency.map((l) => [LABEL[l.variant], ...percentileCells(l.us), number(l.us.count)]),
    ),
    "",
    "### Throughput (heartbeats/s, best of the repeats)",
    "",
    table(
      ["driven with", ...VARIANTS.map((v) => LABEL[v]), "rollcall ÷ baseline"],
      configs.map((c) => [
        c,
        ...VARIANTS.map((v) => number(runOf(v, c).opsPerSec)),
        ratio(runOf("rollcall", c).opsPerSec / runOf("naive", c).opsPerSec),
      ]),
    ),
    "",
    `Ceiling (redis-benchmark, below, best room size): **${number(ceilingOf(h))}** heartbeats/s.`,
    "",
    "Who was busy during each variant's best run (share of one core), and so what bounded it: " +
      "a process near a whole core is the bottleneck, or else the host's cores when they were " +
      "all busy (*host CPU*: cores busy with every process, the others being anything else " +
      `running on the host), otherwise each call waited on its round trip. The host has ` +
      `${r.meta.cores} cores for redis-server, the bench and anything else.`,
    "",
    table(
      [
        "variant",
        "best run",
        "heartbeats/s",
        "redis-server CPU",
        "Redis CPU µs per heartbeat",
        "bench (Node) CPU",
        "Node CPU µs per heartbeat",
        "host CPU, cores",
        "bounded by",
      ],
      VARIANTS.map((v) => {
        const b = best(h.throughput, v);
        return [
          LABEL[v],
          describe(b),
          number(b.opsPerSec),
          percent(b.load.redisCpu),
          number((b.load.redisCpu * 1e6) / b.opsPerSec, 1),
          percent(b.load.clientCpu),
          number((b.load.clientCpu * 1e6) / b.opsPerSec, 1),
          hostCell(b.load, r.meta.cores),
          boundBy(b.load, r.meta.cores),
        ];
      }),
    ),
    "",
    "### Commands per heartbeat (INFO commandstats deltas)",
    "",
    table(
      [
        "variant",
        "mode",
        "sent by the client",
        "run by Redis",
        "script µs",
        "of which commands µs",
        "commands run",
      ],
      h.commands.map((c) => [
        LABEL[c.variant],
        c.mode,
        number(c.sent, 3),
        number(c.executed, 3),
        c.scriptUs === null ? "—" : number(c.scriptUs, 1),
        c.innerUs === null ? "—" : number(c.innerUs, 1),
        Object.entries(c.byCommand)
          .map(([name, calls]) => `${name} ${number(calls, 2)}`)
          .join(", "),
      ]),
    ),
    "",
    "INFO commandstats also counts each command a script runs, so rollcall's *sent* figure counts " +
      "EVAL and EVALSHA calls only (each connection's first call, not counted here, loads the " +
      "script) and the commands its script ran show under *run by Redis*: TIME, one HMGET of the " +
      "room's meta and the user's record, one HSET of the patched record. The baseline sends everything it runs; its MULTI/EXEC variant sends five " +
      "commands in one round trip. *script µs* is the time Redis spent in EVALSHA per " +
      "heartbeat, *of which commands µs* the part spent in the commands the script called; the " +
      "rest is Lua.",
  ].join("\n");
}

function ceilingSection(r: Results): string {
  const c = r.heartbeat.ceiling;
  const summary = summarizeCeiling(c);
  const shown = c.commands.filter((cmd) => cmd.roomSize === (summary[1] ?? summary[0])?.roomSize);
  const repeats = new Set(c.runs.map((run) => run.repeat)).size;
  return [
    "## Ceiling: redis-benchmark, Redis CPU per heartbeat",
    "",
    `${c.redisBenchmark}, \`-c ${c.clients} -P ${number(c.pipeline)} -n ${number(c.requests)}\`, ` +
      `three scripts per room size R, run after each of the ${repeats} throughput repeats ` +
      "(interleaved, the order turning each repeat). R rooms of R users in a deployment of one " +
      "bucket (every room under one hash tag); redis-benchmark draws each `__rand_int__` on its " +
      "own below R, so the room's keys and the user carry one each. *rollcall heartbeat* is the " +
      "command of a real steady heartbeat captured with MONITOR; *baseline's work scripted* is " +
      "the baseline's update_presence as one script (TIME, ZSCORE, ZADD, EXPIRE on the room's " +
      "sorted set); *TIME only* is a script that only reads the time, called with rollcall's " +
      "keys and arguments: the floor of any call. Each run starts with CONFIG RESETSTAT; µs per " +
      "call is INFO commandstats' EVALSHA usec_per_call, median of the repeats; every run is " +
      "checked (each call ran exactly its script's commands, no key was added).",
    "",
    "The commands, R = " + (shown[0]?.roomSize ?? "?") + ":",
    "",
    "```",
    ...shown.map((cmd) => cmd.command.map((a) => (a === "" ? '""' : a)).join(" ")),
    "```",
    "",
    table(
      [
        "R",
        "users",
        ...CEILING_SCRIPTS.map((s) => `${SCRIPT_LABEL[s]} µs`),
        "rollcall ÷ baseline scripted (≤ 1.25×)",
        "same, less TIME only",
        ...CEILING_SCRIPTS.map((s) => `${SCRIPT_LABEL[s]} /s`),
        "redis-server CPU (rollcall)",
        "host CPU, cores (rollcall)",
      ],
      summary.map((s) => [
        number(s.roomSize),
        number(s.roomSize * s.roomSize),
        ...CEILING_SCRIPTS.map((script) => number(s.us[script], 2)),
        ratio(s.ratio),
        ratio(s.workRatio),
        ...CEILING_SCRIPTS.map((script) => number(s.opsPerSec[script])),
        percent(s.rollcallRedisCpu),
        `${number(s.rollcallHostCpu, 2)} of ${r.meta.cores}`,
      ]),
    ),
    "",
    "Calls/s are the best run's. The ratio is the median of each repeat's pair, measured side " +
      "by side. Script time is what each call costs Redis's one core; calls/s adds what Redis " +
      "spends reading requests and writing replies, the same for every script.",
  ].join("\n");
}

function fanoutSection(r: Results): string {
  return [
    "## Fan-out latency (µs, call on one connection to the event on another)",
    "",
    "A newcomer joins a room of 9, starts typing, leaves; rollcall publishes from the script " +
      "(SPUBLISH), the baseline after its own round trips (roster read, then PUBLISH).",
    "",
    table(
      ["event", "variant", ...PERCENTILES, "samples"],
      r.fanout.map((f) => [
        f.event,
        f.variant === "rollcall" ? "rollcall" : "baseline",
        ...percentileCells(f.us),
        number(f.us.count),
      ]),
    ),
  ].join("\n");
}

export function targetsTable(r: Results): string {
  return table(
    ["target", "measured", ""],
    r.targets.map((t) => [t.target, t.measured, t.met ? "met" : "**not met**"]),
  );
}

/** The report of a run of the gateway section alone (`--only gateway`). */
export function gatewayMarkdown(r: Pick<Results, "gateway" | "meta">): string {
  return [
    "# rollcall benchmarks: the gateway alone",
    "",
    headline(r),
    "",
    "The gateway section of the bench, run by itself (`tsx bench/main.ts --only gateway`): " +
      "without the rest of the run, the engine's baselines are left out.",
    "",
    gatewaySection(r),
    "",
  ].join("\n");
}

export function markdown(r: Results): string {
  return [
    "# rollcall benchmarks",
    "",
    headline(r),
    "",
    "rollcall against the naive baseline (docs/baseline.md; `test/kit/naive.ts`, a port; its " +
      "work as one script under redis-benchmark; its sorted sets for memory) and against " +
      "redis-benchmark running rollcall's own heartbeat script, all on the same Redis in the " +
      "same run. Reproduce with `make bench`. The bench reports; it fails only on a broken run " +
      "(a heartbeat that was not steady, a leave missing), never on a figure.",
    "",
    "## Targets",
    "",
    targetsTable(r),
    "",
    heartbeatSection(r),
    "",
    ceilingSection(r),
    "",
    fanoutSection(r),
    "",
    gatewaySection(r),
    "",
    sweepSection(r),
    "",
    liveSection(r),
    "",
    memorySection(r),
    "",
    logSection(r),
    "",
    graceSection(r),
    "",
    scaleSection(r),
    "",
    rosterSection(r),
    "",
    scriptsSection(r.scripts),
    "",
  ].join("\n");
}
