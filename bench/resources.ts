import { number, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import { MEMORY_VARIANTS, type MemoryCell, type MemoryRow, type VariantName } from "./memory.js";
import type { Results } from "./report.js";
import type { SweepResults } from "./sweep.js";
import { idleRoomsPair } from "./targets.js";

/** The report's sections on what Redis spends: sweeping, live rooms, memory. */

export function sweepSection(r: Results): string {
  const s = r.sweep;
  const l = s.leave;
  return [
    "## Sweep",
    "",
    `Each pass, ${number(s.runs[0]?.expirations ?? 0)} connections (full rooms of the size ` +
      "shown) go silent under a 1 s presence window, among idle live rooms that have nothing " +
      "due (a deadline an hour ahead); one `Sweeper.sweepOnce()` at its default batch then " +
      "settles them all: per bucket, one `sweep` script call settles the rooms due, the longest " +
      "overdue first, at most a batch of members and 64 rooms per call, and calls again while " +
      "more is due. " +
      "Every scenario lives side " +
      "by side in the same Redis (rollcall's as deployments with their own key prefix, the " +
      "baseline's under their own conversation names) and each pass sweeps them one after the " +
      `other, so all meet the same load on the host. Passes: ${s.runs[0]?.passes ?? 0}; the ` +
      "median pass by Redis CPU is shown, with the worst script call of all passes. *Redis CPU* " +
      "is redis-server's used_cpu_user + used_cpu_sys over the pass (INFO cpu), *script* the " +
      "time in EVALSHA (INFO commandstats), both per expiration. Script call times are Redis's " +
      "own (INFO latencystats), every sweep call: SLOWLOG at 0 µs would also log " +
      "every command the script runs.",
    "",
    table(
      [
        "room size",
        "idle rooms",
        "expirations",
        "rooms due",
        "script calls",
        "pass ms",
        "expirations/s",
        "Redis CPU µs / expiration",
        "script µs / expiration",
        "call p50 µs",
        "call p99 µs",
        "worst call µs",
      ],
      s.runs.map((run) => [
        number(run.roomSize),
        number(run.idleRooms),
        number(run.expirations),
        number(run.rooms),
        number(run.calls),
        number(run.durationMs),
        number(run.expirationsPerSec),
        number(run.redisCpuUs, 1),
        number(run.scriptUs, 1),
        number(run.callUs.p50),
        number(run.callUs.p99),
        number(run.worstCallUs),
      ]),
    ),
    "",
    `The baseline's sweep over the same expirations in rooms of ${s.roomSize}: \`cleanup_stale\` ` +
      "and a PUBLISH per leave, for " +
      "every conversation, since it cannot find the ones with zombies (16 calls in flight, as " +
      "the Sweeper runs its 16 buckets at once):",
    "",
    table(
      [
        "idle rooms",
        "conversations named",
        "expirations",
        "commands",
        "pass ms",
        "expirations/s",
        "Redis CPU µs / expiration",
      ],
      s.naive.map((run) => [
        number(run.idleRooms),
        number(run.conversations),
        number(run.expirations),
        number(run.commands),
        number(run.durationMs),
        number(run.expirationsPerSec),
        number(run.redisCpuUs, 1),
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
  const { few, many } = idleRoomsPair(s);
  const seedFew = s.naive[0]!;
  const seedMany = s.naive.at(-1)!;
  const change = (from: number, to: number, digits = 0) =>
    `${number(from, digits)} → ${number(to, digits)} (${ratio(to / from)})`;
  return (
    `Idle rooms ${number(few.idleRooms)} → ${number(many.idleRooms)}, expirations in rooms of ` +
    `${number(few.roomSize)}: ` +
    `rollcall's Redis CPU per expiration ${change(few.redisCpuUs, many.redisCpuUs, 1)} µs, ` +
    `its script time per expiration ${change(few.scriptUs, many.scriptUs, 1)} µs, its ` +
    `expirations/s ${change(few.expirationsPerSec, many.expirationsPerSec)}; the baseline's ` +
    `Redis CPU per expiration ${change(seedFew.redisCpuUs, seedMany.redisCpuUs, 1)} µs, its ` +
    `expirations/s ${change(seedFew.expirationsPerSec, seedMany.expirationsPerSec)}.`
  );
}

export function liveSection(r: Results): string {
  const first = r.live[0];
  if (!first) return "";
  const segments = first.segments.length / 2;
  return [
    "## Live rooms: the sweeper's visits against a ZSCORE per heartbeat",
    "",
    "A live room has nothing due, but its due score is a lower bound that steady heartbeats do " +
      "not refresh: the Sweeper visits each live room about once per (window − heartbeat " +
      "interval), finds nobody expired and writes the room's exact deadline. The cheapest way " +
      "to keep live rooms out of the sweep would cost every heartbeat one more command: a " +
      "ZSCORE of the room's due entry (and a rewrite when it nears). Here " +
      `${number(first.connections)} connections, one per user, beat every ` +
      `${number(first.heartbeatMs)} ms at scattered phases under a ${number(first.presenceWindowMs)} ms ` +
      "window (the defaults' 45 s : 15 s ratio) in a deployment of one bucket, in segments of " +
      `${number(first.segments[0]?.seconds ?? 0, 1)} s without a Sweeper and with one at its ` +
      `default interval (after a window to settle), ${segments} of each, alternating. Redis CPU ` +
      "is redis-server's used_cpu Δ over a segment ÷ its heartbeats; the sweeper's share is the " +
      "difference. The alternative is measured with redis-benchmark: (TIME + ZSCORE of a random " +
      "room in the due zset of that many rooms) − (TIME only), median of paired runs.",
    "",
    table(
      [
        "room size",
        "rooms",
        "heartbeats/s",
        "Redis CPU µs / heartbeat, no sweeper",
        "with a sweeper",
        "sweeper's share",
        "sweeper's script µs / heartbeat",
        "visits per room per window",
        "Redis CPU µs per visit",
        "ZSCORE per heartbeat µs",
        "sweeping is cheaper",
      ],
      r.live.map((l) => {
        const measured = l.segments.filter((s) => s.sweeping);
        const heartbeats = measured.reduce((sum, s) => sum + s.heartbeats, 0);
        const seconds = measured.reduce((sum, s) => sum + s.seconds, 0);
        return [
          number(l.roomSize),
          number(l.rooms),
          number(heartbeats / seconds),
          number(l.without.redisCpuUs, 2),
          number(l.with.redisCpuUs, 2),
          number(l.sweepUs, 2),
          number(l.sweepScriptUs, 2),
          number(l.visitsPerRoomPerWindow, 2),
          number(l.visitUs, 1),
          `${number(l.alternative.extraUs, 2)} (${number(l.alternative.zscoreUs, 2)} − ${number(l.alternative.timeUs, 2)})`,
          l.cheaper ? "yes" : "**no**",
        ];
      }),
    ),
    "",
    "*sweeper's script µs* is the Sweeper's time in its scripts per heartbeat (EVALSHA time " +
      "with a sweeper, less its heartbeats at the time per call without one), a second " +
      "estimate of its share that leaves out I/O. Segments:",
    "",
    table(
      ["room size", "sweeper", "s", "heartbeats", "Redis CPU µs / heartbeat", "passes", "visits"],
      r.live.flatMap((l) =>
        l.segments.map((s) => [
          number(l.roomSize),
          s.sweeping ? "yes" : "no",
          number(s.seconds, 1),
          number(s.heartbeats),
          number((s.redisCpuSeconds * 1e6) / s.heartbeats, 2),
          number(s.passes),
          number(s.visits),
        ]),
      ),
    ),
  ].join("\n");
}

const VARIANT_LABEL: Record<VariantName, string> = {
  a: "(a) 1 short-id connection per user, no state",
  b: '(b) 1 UUID connection per user, state {"status":"online"}',
  c: "(c) 2 short-id connections per user, no state",
  d: "(d) 2 UUID connections per user, the same state",
};

export function memorySection(r: Results): string {
  const { rows, replay } = r.memory;
  const cellOf = (row: MemoryRow, v: VariantName) => row.cells.find((c) => c.variant === v)!;
  const byVariant = (cell: (c: MemoryCell, row: MemoryRow) => string) =>
    rows.map((row) => [
      number(row.roomSize),
      ...MEMORY_VARIANTS.map((v) => cell(cellOf(row, v.name), row)),
    ]);
  const header = (first: string) => [first, ...MEMORY_VARIANTS.map((v) => VARIANT_LABEL[v.name])];
  const kinds = [
    ...new Set(rows.flatMap((row) => row.cells.flatMap((c) => Object.keys(c.footprint.byKind)))),
  ].sort();
  const kept = replay.usedMemory;
  return [
    "## Memory: bytes per connection and per user",
    "",
    `Full rooms, at least ${number(Math.min(...rows.map((row) => row.users)))} users per cell ` +
      "(whole rooms; connections in the targets), each cell on an emptied Redis. " +
      "The baseline's layout (a sorted set per room, user → time) has one member per user and no " +
      "state, so it is compared per connection (its member standing for the connection) and per " +
      "user. *MEMORY USAGE*: the sum over every key (SAMPLES 0: every element), values and key " +
      "names. *used_memory Δ*: the growth of INFO used_memory, which adds the keyspace's own " +
      "entries, expiry entries and the allocator's rounding. Replies kept for resends are " +
      "deleted before weighing (they last the replay window; weighed below).",
    "",
    "### MEMORY USAGE per connection (× the baseline's per member)",
    "",
    table(
      [...header("room size"), "baseline"],
      byVariant(
        (c) => `${number(c.perConnection.memoryUsage)} (${ratio(c.ratio.perConnection)})`,
      ).map((cells, i) => [...cells, number(rows[i]!.naive.perUser.memoryUsage)]),
    ),
    "",
    "### Right after a storm of joins",
    "",
    "Everyone joins at once with the default options (connection `c1`, no state) and every key " +
      "is weighed at once, the replies the joins kept for resends included.",
    "",
    table(
      ["room size", "connections", "MEMORY USAGE per connection", "baseline", "× baseline"],
      rows.map((row) => [
        number(row.roomSize),
        number(row.users),
        number(row.storm.perConnection.memoryUsage),
        number(row.naive.perUser.memoryUsage),
        ratio(row.storm.ratio),
      ]),
    ),
    "",
    "### MEMORY USAGE per user (× the baseline's)",
    "",
    table(
      [...header("room size"), "baseline"],
      byVariant((c) => `${number(c.perUser.memoryUsage)} (${ratio(c.ratio.perUser)})`).map(
        (cells, i) => [...cells, number(rows[i]!.naive.perUser.memoryUsage)],
      ),
    ),
    "",
    "### used_memory Δ per connection, per user",
    "",
    table(
      [...header("room size"), "baseline"],
      byVariant(
        (c, row) =>
          `${number(c.perConnection.usedMemory)}, ${number(c.perUser.usedMemory)} ` +
          `(${ratio(c.perUser.usedMemory / row.naive.perUser.usedMemory)} per user)`,
      ).map((cells, i) => [...cells, number(rows[i]!.naive.perUser.usedMemory)]),
    ),
    "",
    "### rollcall's MEMORY USAGE per connection by kind of key",
    "",
    "`u` the room hashes (user → packed record), `z` the index of rooms over 128 members, `due` " +
      "the buckets' room → deadline zsets, `seq` the buckets' counters, `deployment` the " +
      "settings; keys per cell in the last column.",
    "",
    table(
      ["room size", "variant", ...kinds, "keys"],
      rows.flatMap((row) =>
        row.cells.map((c) => [
          number(row.roomSize),
          c.variant,
          ...kinds.map((k) => number((c.footprint.byKind[k] ?? 0) / c.connections, 1)),
          number(c.footprint.keys),
        ]),
      ),
    ),
    "",
    "### Kept replies (transient)",
    "",
    `A call that changed something keeps its reply for the replay window ` +
      `(${number(replay.replayWindowMs / 1000)} s by default), so that a resend gets it again: ` +
      `${number(replay.entryBytes)} bytes appended to one string per bucket and generation of an ` +
      `instance's calls (after a 2-byte header: the highest call number kept in it). Over ${number(replay.joins)} joins: ${number(replay.keys)} strings, ` +
      `MEMORY USAGE ${number(replay.memoryUsage, 1)} B per reply, used_memory ` +
      `${number(kept, 1)} B per reply. A deployment holds about bytes × transitions/s × replay ` +
      "window of them: at 1,000 joins, leaves, typing and state changes a second, " +
      `${number((kept * 1_000 * replay.replayWindowMs) / 1000 / 1e6, 1)} MB.`,
  ].join("\n");
}
