import { Rollcall, type RollcallOptions } from "../src/index.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { members, STEADY, type Member } from "./population.js";
import type { Progress } from "./progress.js";
import { commandStats, commandsBetween, median, underLoad } from "./stats.js";
import { number, percent, table } from "./format.js";
import { memory } from "./memory.js";
import { resultOf, type Row, type Run, type Section } from "./section.js";

/**
 * The event log, to decide from what it costs per event whether it is on by default. Two deployments side by side in one Redis, the same but for `logLength`: present
 * users start and stop typing in a loop (two events per cycle, one per call), the variants in
 * alternating runs. What Redis spends per event with the log and without, and what the log
 * keeps in memory.
 */

export interface LogProfile {
  logLength: number;
  rooms: number;
  usersPerRoom: number;
  /** Users typing at once, each start then stop in turn (calls in flight, one connection). */
  inFlight: number;
  runMs: number;
  repeats: number;
}

export interface LogRun {
  log: boolean;
  repeat: number;
  seconds: number;
  /** Events published: one per call, checked (SPUBLISH count = script calls). */
  events: number;
  /** Redis's time in EVALSHA per call (INFO commandstats), µs. */
  scriptUs: number;
  /** redis-server CPU (used_cpu_user + sys) per event, µs: I/O included. */
  redisCpuUs: number;
  /** XADD per event: 1 with the log, 0 without (checked); the XADD's own time per event, µs. */
  xaddPerEvent: number;
  xaddUs: number;
  eventsPerSec: number;
}

export interface LogCost {
  scriptUs: number;
  redisCpuUs: number;
}

export interface LogMemory {
  streams: number;
  /** Entries in the streams (XLEN) and their MEMORY USAGE (SAMPLES 0), after the runs. */
  entries: number;
  memoryUsage: number;
  bytesPerEntry: number;
  /** bytes per entry × logLength × buckets: what a deployment's full log holds, about. */
  boundBytes: number;
  /** The JSON of a typing event and of a join into a room of `usersPerRoom`, bytes. */
  typingEventBytes: number;
  joinEventBytes: number;
  /** The bound if every event kept were such a join (bytes per entry grown by the difference). */
  joinBoundBytes: number;
}

export interface LogResults {
  logLength: number;
  buckets: number;
  users: number;
  inFlight: number;
  runs: LogRun[];
  /** Medians over the repeats. */
  off: LogCost;
  on: LogCost;
  /** on − off, µs per event, and as a share of off: medians of each repeat's pair. */
  extra: LogCost & { redisCpuShare: number; scriptShare: number };
  memory: LogMemory;
}

function logSteps(p: LogProfile): number {
  return 2 + p.repeats + 1;
}

async function benchLog(lab: Lab, profile: LogProfile, progress: Progress): Promise<LogResults> {
  const { logLength, rooms, usersPerRoom, inFlight, runMs, repeats } = profile;
  await lab.flush();
  const options = (log: boolean): RollcallOptions => ({
    ...STEADY,
    prefix: log ? "logon" : "logoff",
    logLength: log ? logLength : 0,
  });
  const population = members(rooms, usersPerRoom, "typists");
  const variants = [false, true].map((log) => {
    const client = lab.connect({ enableAutoPipelining: true });
    return { log, client, rollcall: new Rollcall(client, options(log)) };
  });
  const on = variants[1]!.rollcall;
  const buckets = on.settings.buckets;
  const streams = Array.from({ length: buckets }, (_, b) => on.layout.log(b));
  let joinEventBytes = 0;
  await progress.step("event log: users present", async () => {
    for (const v of variants) {
      await forEachInFlight(population, 64, (m) => v.rollcall.heartbeat(m.room, m.user, "c"));
      // Loads startTyping and stopTyping on the connection (its first call of each is an EVAL).
      await cycle(v.rollcall, population[0]!);
    }
    await lab.dropReplies();
    joinEventBytes = await longestJoin(lab, streams);
  });
  const typingEvent = await progress.step("event log: fill the log to its length", async () => {
    // A long-running deployment's log is full: every XADD then also trims. Fill each bucket's
    // stream with copies of a real typing event first (the warm-up cycle's stop).
    const first = on.layout.log(on.layout.room(population[0]!.room).bucket);
    const [last] = await lab.admin.xrevrange(first, "+", "-", "COUNT", 1);
    const event = last?.[1][1];
    if (event === undefined) throw new Error(`no typing event in ${first}`);
    for (const stream of streams) {
      for (let added = 0; added < logLength; added += 1_000) {
        const pipeline = lab.admin.pipeline();
        for (let i = added; i < Math.min(logLength, added + 1_000); i++) {
          pipeline.xadd(stream, "MAXLEN", "~", logLength, "*", "event", event);
        }
        await pipeline.exec();
      }
    }
    return event;
  });

  const runs: LogRun[] = [];
  for (let repeat = 0; repeat < repeats; repeat++) {
    await progress.step(`event log: typing loop ${repeat + 1}/${repeats}`, async () => {
      const order = repeat % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order)
        runs.push(await typingRun(lab, v, population, inFlight, runMs, repeat));
    });
  }
  const memory = await progress.step("event log: weigh the streams", async () => {
    let entries = 0;
    let bytes = 0;
    for (const stream of streams) {
      entries += await lab.admin.xlen(stream);
      bytes += (await lab.admin.memory("USAGE", stream, "SAMPLES", 0)) ?? 0;
    }
    const bytesPerEntry = bytes / entries;
    const typingEventBytes = Buffer.byteLength(typingEvent);
    return {
      streams: streams.length,
      entries,
      memoryUsage: bytes,
      bytesPerEntry,
      boundBytes: bytesPerEntry * logLength * buckets,
      typingEventBytes,
      joinEventBytes,
      joinBoundBytes: (bytesPerEntry + joinEventBytes - typingEventBytes) * logLength * buckets,
    };
  });
  for (const v of variants) lab.release(v.client);
  await lab.flush();

  const cost = (log: boolean): LogCost => {
    const of = runs.filter((r) => r.log === log);
    return {
      scriptUs: median(of, (r) => r.scriptUs).scriptUs,
      redisCpuUs: median(of, (r) => r.redisCpuUs).redisCpuUs,
    };
  };
  const off = cost(false);
  const withLog = cost(true);
  // Each repeat's pair ran back to back: the median of their differences, not the difference
  // of the medians, so that drift on the host between repeats cancels.
  const paired = (field: keyof LogCost) => {
    const pairs = [...new Set(runs.map((r) => r.repeat))].map((repeat) => {
      const at = (log: boolean) => runs.find((r) => r.repeat === repeat && r.log === log)!;
      return { extra: at(true)[field] - at(false)[field], off: at(false)[field] };
    });
    return {
      us: median(pairs, (p) => p.extra).extra,
      share: median(pairs, (p) => p.extra / p.off),
    };
  };
  const script = paired("scriptUs");
  const cpu = paired("redisCpuUs");
  const extra = {
    scriptUs: script.us,
    redisCpuUs: cpu.us,
    scriptShare: script.share.extra / script.share.off,
    redisCpuShare: cpu.share.extra / cpu.share.off,
  };
  return {
    logLength,
    buckets,
    users: population.length,
    inFlight,
    runs,
    off,
    on: withLog,
    extra,
    memory,
  };
}

/** One start and one stop of a present user's typing: two calls, two events. */
async function cycle(rollcall: Rollcall, m: Member): Promise<void> {
  const { started } = await rollcall.startTyping(m.room, m.user);
  const { stopped } = await rollcall.stopTyping(m.room, m.user);
  if (!started || !stopped) throw new Error(`typing of ${m.user} in ${m.room} published nothing`);
}

/** The longest join event in the streams (the population's joins): a room's last joiner's. */
async function longestJoin(lab: Lab, streams: readonly string[]): Promise<number> {
  let longest = 0;
  for (const stream of streams) {
    for (const [, fields] of await lab.admin.xrange(stream, "-", "+")) {
      const event = fields[1] ?? "";
      if (event.includes('"type":"join"')) longest = Math.max(longest, Buffer.byteLength(event));
    }
  }
  return longest;
}

async function typingRun(
  lab: Lab,
  v: { log: boolean; rollcall: Rollcall },
  population: readonly Member[],
  inFlight: number,
  runMs: number,
  repeat: number,
): Promise<LogRun> {
  await lab.collectLuaGarbage();
  const before = await commandStats(lab.admin);
  const [, load] = await underLoad(lab.admin, async () => {
    const deadline = performance.now() + runMs;
    // Worker w types as users w, w + inFlight, …: no user is in two cycles at once.
    await Promise.all(
      Array.from({ length: inFlight }, async (_, w) => {
        for (let i = w; performance.now() < deadline; i += inFlight) {
          await cycle(v.rollcall, population[i % population.length]!);
        }
      }),
    );
  });
  const ran = commandsBetween(before, await commandStats(lab.admin));
  const stat = (name: string) => ran.get(name) ?? { calls: 0, usec: 0, failed: 0 };
  const calls = stat("evalsha");
  const published = stat("spublish").calls;
  const xadds = stat("xadd").calls;
  const xaddUsec = stat("xadd").usec;
  const what = `typing loop, log ${v.log ? "on" : "off"}`;
  if (calls.failed > 0 || published !== calls.calls) {
    throw new Error(`${what}: ${calls.calls} calls (${calls.failed} failed), ${published} events`);
  }
  if (xadds !== (v.log ? calls.calls : 0)) {
    throw new Error(`${what}: ${xadds} XADD for ${calls.calls} events`);
  }
  const cpuSeconds = load.redisCpu * load.seconds;
  return {
    log: v.log,
    repeat,
    seconds: load.seconds,
    events: published,
    scriptUs: calls.usec / calls.calls,
    redisCpuUs: (cpuSeconds * 1e6) / published,
    xaddPerEvent: xadds / published,
    xaddUs: xaddUsec / published,
    eventsPerSec: published / load.seconds,
  };
}

/**
 * Why the library keeps the log off by default, in this run's figures: each event costs little
 * more, but the log's memory is a fixed bound, whatever the size of the deployment.
 */
function logDefault(l: LogResults, run: Run): string {
  const { extra, memory: m } = l;
  const presence = resultOf(memory, run)
    ?.rows.find((row) => row.roomSize === 20)
    ?.cells.find((c) => c.variant === "a")?.perConnection.memoryUsage;
  const mb = (bytes: number) => number(bytes / 1024 / 1024, 1);
  const scale = presence
    ? `: as much as the presence of about ${number(m.boundBytes / presence)} connections ` +
      `in rooms of 20 (${number(presence)} B each, memory section)`
    : "";
  return (
    `Off by default: the log adds ${number(extra.redisCpuUs, 2)} µs of Redis CPU per event ` +
    `(${number(100 * extra.redisCpuShare)}%), little, but it holds up to about ` +
    `${mb(m.boundBytes)} MB at this logLength${scale}. Turn it on where a server ` +
    "consumer needs every event."
  );
}

function logSection(l: LogResults, run: Run): string {
  const m = l.memory;
  const mb = (bytes: number) => number(bytes / 1024 / 1024, 1);
  return [
    "## Event log: cost per event, on against off",
    "",
    `Two deployments side by side, the same but for \`logLength\` (0, and ` +
      `${number(l.logLength)}; ${l.buckets} buckets): ${number(l.users)} present users in rooms ` +
      `of 20 start and stop typing in a loop, ${l.inFlight} at a time on one auto-pipelined ` +
      "connection: one event per call (checked: SPUBLISH count = calls, and one XADD per event " +
      "with the log, none without). Before the runs every bucket's stream is filled to " +
      "`logLength` with copies of a real typing event, so that each XADD also trims, as in a " +
      "deployment that has run a while. The variants alternate run by run, their order turning; " +
      "*script* is Redis's time in EVALSHA per event (INFO commandstats), *Redis CPU* " +
      "redis-server's used_cpu over the run per event (I/O included). A steady heartbeat, most " +
      "of a deployment's calls, publishes nothing and never touches the log.",
    "",
    table(
      ["log", "script µs / event", "Redis CPU µs / event"],
      [
        ["off (median)", number(l.off.scriptUs, 2), number(l.off.redisCpuUs, 2)],
        [
          `on, ${number(l.logLength)} (median)`,
          number(l.on.scriptUs, 2),
          number(l.on.redisCpuUs, 2),
        ],
        [
          "**on − off** (median of each repeat's pair)",
          `${number(l.extra.scriptUs, 2)} (${percent(l.extra.scriptShare)})`,
          `${number(l.extra.redisCpuUs, 2)} (${percent(l.extra.redisCpuShare)})`,
        ],
      ],
    ),
    "",
    "Runs:",
    "",
    table(
      [
        "repeat",
        "log",
        "events",
        "events/s",
        "script µs / event",
        "Redis CPU µs / event",
        "XADD / event",
        "of which XADD µs / event",
      ],
      l.runs.map((run) => [
        number(run.repeat + 1),
        run.log ? "on" : "off",
        number(run.events),
        number(run.eventsPerSec),
        number(run.scriptUs, 2),
        number(run.redisCpuUs, 2),
        number(run.xaddPerEvent, 2),
        number(run.xaddUs, 2),
      ]),
    ),
    "",
    `Memory: the ${m.streams} streams hold ${number(m.entries)} entries in ` +
      `${mb(m.memoryUsage)} MB (MEMORY USAGE, SAMPLES 0): **${number(m.bytesPerEntry)} B per ` +
      `event kept** (a typing event's JSON is ${m.typingEventBytes} B). The bound, bytes per ` +
      `event × logLength × buckets: **${mb(m.boundBytes)} MB** per deployment (\`MAXLEN ~\` ` +
      "trims whole stream nodes, so a stream may pass logLength by up to a node, 100 entries). " +
      `A join into a room of 20 is ${m.joinEventBytes} B of JSON (its roster lists the ` +
      `members): a log of such events only would hold about ${mb(m.joinBoundBytes)} MB.`,
    "",
    `**${logDefault(l, run)}**`,
  ].join("\n");
}

/** The event log's cost per event, on against off, and its memory. */
export const eventLog: Section<LogProfile, LogResults> = {
  name: "log",
  profiles: {
    full: {
      logLength: 10_000,
      rooms: 50,
      usersPerRoom: 20,
      inFlight: 16,
      runMs: 1_200,
      repeats: 5,
    },
    smoke: { logLength: 1_000, rooms: 10, usersPerRoom: 20, inFlight: 16, runMs: 300, repeats: 1 },
  },
  steps: logSteps,
  run: benchLog,
  report: logSection,
  rows: ({ extra, memory: m, logLength }): Row[] => [
    {
      name: "event log on: extra Redis CPU per event",
      value: extra.redisCpuUs,
      unit: "µs",
      digits: 2,
      note: percent(extra.redisCpuShare),
    },
    { name: `event log's bound at logLength ${number(logLength)}`, value: m.boundBytes, unit: "B" },
  ],
};
