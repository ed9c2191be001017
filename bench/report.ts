import type { CeilingResults, CeilingRun } from "./ceiling.js";
import type { FanoutResult } from "./fanout.js";
import {
  describe,
  ROUND_TRIP,
  VARIANTS,
  type HeartbeatResults,
  type LatencyResult,
  type ThroughputRun,
  type Variant,
} from "./heartbeat.js";
import type { MemoryRow } from "./memory.js";
import type { Percentiles } from "./stats.js";
import type { SweepResults } from "./sweep.js";

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

export interface Target {
  target: string;
  measured: string;
  met: boolean;
}

export interface Results {
  meta: Meta;
  heartbeat: HeartbeatResults;
  fanout: FanoutResult[];
  sweep: SweepResults;
  memory: MemoryRow[];
  targets: Target[];
}

const LABEL: Record<LatencyResult["variant"], string> = {
  rollcall: "rollcall (1 EVALSHA)",
  naive: "seed (ZSCORE, ZADD, EXPIRE)",
  multi: "seed in MULTI/EXEC",
  [ROUND_TRIP]: "one round trip (PING), for scale",
};

function number(n: number, digits = 0): string {
  return n.toLocaleString("en-US", {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

function ratio(n: number): string {
  return `${number(n, 2)}×`;
}

/** The best run of a variant over every configuration: its saturated throughput. */
export function best(runs: readonly ThroughputRun[], variant: Variant): ThroughputRun {
  return runs
    .filter((r) => r.variant === variant)
    .reduce((a, b) => (b.opsPerSec > a.opsPerSec ? b : a));
}

export function ceilingOf(ceiling: CeilingResults): number {
  return Math.max(...ceiling.runs.map((r) => r.opsPerSec));
}

function latencyOf(heartbeat: HeartbeatResults, variant: Variant): Percentiles {
  return heartbeat.latency.find((l) => l.variant === variant)!.us;
}

/** The targets, reported against, never asserted. */
export function targets(r: Omit<Results, "targets">): Target[] {
  const rollcallP50 = latencyOf(r.heartbeat, "rollcall").p50;
  const naiveP50 = latencyOf(r.heartbeat, "naive").p50;
  const rollcall = best(r.heartbeat.throughput, "rollcall").opsPerSec;
  const naive = best(r.heartbeat.throughput, "naive").opsPerSec;
  const ceiling = ceilingOf(r.heartbeat.ceiling);
  const counts = r.heartbeat.commands.filter((c) => c.variant === "rollcall");
  return [
    {
      target: "sequential heartbeat p50 ≤ 0.4× the seed's",
      measured: `${ratio(rollcallP50 / naiveP50)} (${rollcallP50} µs vs ${naiveP50} µs)`,
      met: rollcallP50 <= 0.4 * naiveP50,
    },
    {
      target: "saturated throughput ≥ 1.5× the seed's",
      measured: `${ratio(rollcall / naive)} (${number(rollcall)} vs ${number(naive)} /s)`,
      met: rollcall >= 1.5 * naive,
    },
    {
      target: "saturated throughput ≥ 80% of the redis-benchmark ceiling",
      measured: `${number((100 * rollcall) / ceiling)}% (${number(rollcall)} vs ${number(ceiling)} /s)`,
      met: rollcall >= 0.8 * ceiling,
    },
    {
      target: "exactly 1.0 command per heartbeat",
      measured: counts.map((c) => `${number(c.sent, 3)} (${c.mode})`).join(", "),
      met: counts.every((c) => c.sent === 1),
    },
  ];
}

function table(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

function percentileCells(p: Percentiles, scale = 1): string[] {
  const digits = scale === 1 ? 0 : 1;
  return [p.p50, p.p90, p.p99, p.p999, p.max].map((v) => number(v / scale, digits));
}

const PERCENTILES = ["p50", "p90", "p99", "p99.9", "max"];

function percent(share: number): string {
  return `${number(100 * share)}%`;
}

export function headline(r: Results): string {
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
  const ceiling = ceilingOf(r.heartbeat.ceiling);
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
      ["driven with", ...VARIANTS.map((v) => LABEL[v]), "rollcall ÷ seed"],
      configs.map((c) => [
        c,
        ...VARIANTS.map((v) => number(runOf(v, c).opsPerSec)),
        ratio(runOf("rollcall", c).opsPerSec / runOf("naive", c).opsPerSec),
      ]),
    ),
    "",
    `Ceiling (redis-benchmark, below): **${number(ceiling)}** heartbeats/s.`,
    "",
    "Who was busy during each variant's best run (share of one core):",
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
      "EVAL and EVALSHA calls only (ioredis sends EVAL once per connection, then EVALSHA) and " +
      "the commands its script ran show under *run by Redis*. The seed sends everything it runs; " +
      "its MULTI/EXEC variant sends five commands in one round trip. *script µs* is the time " +
      "Redis spent in EVALSHA per heartbeat, *of which commands µs* the part spent in the " +
      "commands the script called; the rest is Lua.",
  ].join("\n");
}

function ceilingSection(r: Results): string {
  const c = r.heartbeat.ceiling;
  const bestRuns = new Map<string, CeilingRun>();
  for (const run of c.runs) {
    const config = `${run.clients} ${run.pipeline}`;
    if ((bestRuns.get(config)?.opsPerSec ?? -1) < run.opsPerSec) bestRuns.set(config, run);
  }
  return [
    "## Ceiling: redis-benchmark running the heartbeat script",
    "",
    `${c.redisBenchmark}, run after each throughput repeat (best run shown); the command ` +
      "captured from a real heartbeat (MONITOR), the user drawn at random among the present ones:",
    "",
    "```",
    c.command.map((a) => (a === "" ? '""' : a)).join(" "),
    "```",
    "",
    table(
      ["clients", "pipeline", "requests", "heartbeats/s", "p50 ms", "p99 ms", "redis-server CPU"],
      [...bestRuns.values()].map((run) => [
        run.clients,
        run.pipeline,
        number(run.requests),
        number(run.opsPerSec),
        number(run.p50Ms, 3),
        number(run.p99Ms, 3),
        percent(run.load.redisCpu),
      ]),
    ),
  ].join("\n");
}

function fanoutSection(r: Results): string {
  return [
    "## Fan-out latency (µs, call on one connection to the event on another)",
    "",
    "A newcomer joins a room of 9, starts typing, leaves; rollcall publishes from the script " +
      "(SPUBLISH), the seed after its own round trips (roster read, then PUBLISH).",
    "",
    table(
      ["event", "variant", ...PERCENTILES, "samples"],
      r.fanout.map((f) => [
        f.event,
        f.variant === "rollcall" ? "rollcall" : "seed",
        ...percentileCells(f.us),
        number(f.us.count),
      ]),
    ),
  ].join("\n");
}

function sweepSection(r: Results): string {
  const s = r.sweep;
  const l = s.leave;
  return [
    "## Sweep",
    "",
    `Each pass, ${number(s.runs[0]?.expirations ?? 0)} connections in rooms of ${s.roomSize} ` +
      "go silent under a 1 s presence window, among live idle rooms that have nothing due; one " +
      "`Sweeper.sweepOnce()` then settles them all. Every scenario lives side by side in the " +
      "same Redis (rollcall's as deployments with their own key prefix, the seed's under their " +
      "own conversation names) and each pass sweeps them one after the other, so all meet the " +
      `same load on the host. Passes: ${s.runs[0]?.passes ?? 0}; the median pass is shown, ` +
      "with the worst script call of all passes. Script call times are Redis's own (INFO " +
      "latencystats): SLOWLOG at 0 µs would also log every command the script runs, and " +
      "doubled the sweep's cost when tried. *default* is the Sweeper's default batch.",
    "",
    table(
      [
        "batch",
        "idle rooms",
        "expirations",
        "script calls",
        "pass ms",
        "expirations/s",
        "call p50 µs",
        "call p99 µs",
        "worst call µs",
      ],
      s.runs.map((run) => [
        run.batch,
        number(run.idleRooms),
        number(run.expirations),
        number(run.calls),
        number(run.durationMs),
        number(run.expirationsPerSec),
        number(run.callUs.p50),
        number(run.callUs.p99),
        number(run.worstCallUs),
      ]),
    ),
    "",
    "The seed's sweep over the same expirations: `cleanup_stale` and a PUBLISH per leave, for " +
      "every conversation, since it cannot find the ones with zombies (16 calls in flight, as " +
      "the Sweeper runs its 16 buckets at once):",
    "",
    table(
      ["idle rooms", "conversations named", "expirations", "commands", "pass ms", "expirations/s"],
      s.naive.map((run) => [
        number(run.idleRooms),
        number(run.conversations),
        number(run.expirations),
        number(run.commands),
        number(run.durationMs),
        number(run.expirationsPerSec),
      ]),
    ),
    "",
    idleRoomsVerdict(s),
    "",
    `### Leave latency (ms): ${number(l.connections)} connections go silent, a Sweeper runs ` +
      `every ${number(l.sweepIntervalMs)} ms, window ${number(l.presenceWindowMs)} ms`,
    "",
    "Arrival of the leave at a subscriber minus (last heartbeat + presence window):",
    "",
    table(PERCENTILES, [percentileCells(l.us, 1000)]),
  ].join("\n");
}

/** The same expirations among few and many idle rooms: rollcall's cost must not grow. */
function idleRoomsVerdict(s: SweepResults): string {
  const few = s.runs.find((run) => run.batch === "default")!;
  const many = s.runs.filter((run) => run.batch === "default").at(-1)!;
  const seedFew = s.naive[0]!;
  const seedMany = s.naive.at(-1)!;
  const change = (from: number, to: number) =>
    `${number(from)} → ${number(to)} (${ratio(to / from)})`;
  return (
    `Idle rooms ${number(few.idleRooms)} → ${number(many.idleRooms)}, at the default batch: ` +
    `rollcall's expirations/s ${change(few.expirationsPerSec, many.expirationsPerSec)}, its ` +
    `median call ${change(few.callUs.p50, many.callUs.p50)} µs; the seed's expirations/s ` +
    `${change(seedFew.expirationsPerSec, seedMany.expirationsPerSec)}.`
  );
}

function memorySection(r: Results): string {
  const kinds = [...new Set(r.memory.flatMap((m) => Object.keys(m.rollcall.byKind)))].sort();
  return [
    "## Memory per online connection (bytes)",
    "",
    "Full rooms, one connection per user. *MEMORY USAGE*: the sum over every key of the " +
      "deployment (values and key names). *used_memory Δ*: the growth of INFO used_memory on an " +
      "otherwise empty Redis, which adds the keyspace's own entries and the allocator's rounding.",
    "",
    table(
      [
        "room size",
        "connections",
        "rollcall MEMORY USAGE",
        "rollcall used_memory Δ",
        "rollcall keys",
        "seed MEMORY USAGE",
        "seed used_memory Δ",
        "seed keys",
      ],
      r.memory.map((m) => [
        number(m.roomSize),
        number(m.connections),
        number(m.rollcall.memoryUsage),
        number(m.rollcall.usedMemory),
        number(m.rollcall.keys),
        number(m.naive.memoryUsage),
        number(m.naive.usedMemory),
        number(m.naive.keys),
      ]),
    ),
    "",
    "rollcall's MEMORY USAGE per connection by key (every bucket's keys of one kind together):",
    "",
    table(
      ["room size", ...kinds.map((k) => `${k}`)],
      r.memory.map((m) => [
        number(m.roomSize),
        ...kinds.map((k) => number(m.rollcall.byKind[k] ?? 0)),
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

export function markdown(r: Results): string {
  return [
    "# rollcall benchmarks",
    "",
    headline(r),
    "",
    "rollcall against the seed's naive tracker (`bench/naive.ts`, a call-for-call port) and " +
      "against redis-benchmark running rollcall's own heartbeat script, all on the same Redis in " +
      "the same run. Reproduce with `make bench`.",
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
    sweepSection(r),
    "",
    memorySection(r),
    "",
  ].join("\n");
}
