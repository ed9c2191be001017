import { number, percent, percentileCells, PERCENTILES, ratio, table } from "./format.js";
import type { GatewayHeartbeatRun, IdleResult, IdleRun, ProcessMemory } from "./gateway.js";
import { STEADY_VARIANTS, type SteadyVariant } from "./grace.js";
import type { Results } from "./report.js";
import { describe } from "./heartbeat.js";
import { best } from "./targets.js";

/** The report's sections on the gateway, the event log, and the grace and capacity. */

const MB = 1024 * 1024;

function memoryCells(m: ProcessMemory, scale = 1, digits = 0): string[] {
  return [m.rss, m.heapUsed, m.external, m.arrayBuffers].map((v) => number(v / scale, digits));
}

/**
 * Who held a gateway run back: a process near a whole core, or else the host's cores when they
 * were nearly all busy (three processes of the bench, and anything else, share them).
 */
function gatewayBound(run: GatewayHeartbeatRun, cores: number): string {
  const processes = [
    { who: "gateway", share: run.gatewayCpu },
    { who: "redis-server", share: run.redisCpu },
    { who: "bench", share: run.benchCpu },
  ];
  const busy = processes.filter((p) => p.share >= 0.9);
  if (busy.length > 0) return busy.map((p) => `${p.who} CPU`).join(", ");
  const busiest = processes.reduce((a, b) => (b.share > a.share ? b : a));
  if (run.hostCpu >= 0.8 * cores) {
    return `the host's cores (busiest: ${busiest.who}, ${percent(busiest.share)})`;
  }
  return "round trips";
}

/** Cores busy with anything but the gateway, Redis and the bench. */
function others(run: GatewayHeartbeatRun): number {
  return Math.max(0, run.hostCpu - run.gatewayCpu - run.redisCpu - run.benchCpu);
}

/** Idle sockets on a gateway and on a plain ws server, and the upgrades per second of each. */
function idleSection(idle: IdleResult): string[] {
  const row = (name: string, run: IdleRun) => [
    name,
    number(run.upgradesPerSec),
    ...memoryCells(run.perSocket),
    number(run.opened.rss / MB, 1),
  ];
  return [
    `### Idle sockets: ${number(idle.sockets)} on a gateway process, and on a plain \`ws\` server`,
    "",
    `Each socket opens (${idle.opening} handshakes under way at once) and joins no room. The ` +
      "gateway verifies a distinct HS256 token for each (signed beforehand, offered as a " +
      "`rollcall.bearer.` subprotocol entry), checks its caps and keeps a session; the plain " +
      "server (`test/kit/gatewayProcess.ts --plain`: a bare `WebSocketServer` set up as the " +
      "gateway's, no compression, no client tracking) accepts and holds. Bytes per socket: the " +
      "process after a full collection with every socket open, less before, ÷ sockets.",
    "",
    table(
      ["server", "upgrades/s", "RSS B/socket", "heap used", "external", "array buffers", "RSS, MB"],
      [row("gateway (JWT verified)", idle.gateway), row("plain ws", idle.plain)],
    ),
    "",
    `The gateway's own share: ${number(idle.gateway.perSocket.rss - idle.plain.perSocket.rss)} B ` +
      "of RSS per idle socket over the plain server's.",
    "",
  ];
}

/** The gateway's figures; the engine's baselines where the run has them (not with --only). */
export function gatewaySection(r: Pick<Results, "gateway" | "meta"> & Partial<Results>): string {
  const g = r.gateway;
  const s = g.sockets;
  const memoryRow = r.memory?.rows.find((row) => row.roomSize === s.roomSize);
  const engine = memoryRow?.cells.find((c) => c.variant === "b");
  const engineFanout = (event: string) =>
    r.fanout?.find((f) => f.event === event && f.variant === "rollcall");
  const h = g.heartbeats;
  const bestRun = h.runs.reduce((a, b) => (b.framesPerSec > a.framesPerSec ? b : a));
  const roomBeats = bestRun.framesPerSec * h.roomsPerSocket;
  const c = g.calls;
  const direct = r.heartbeat ? best(r.heartbeat.throughput, "rollcall") : undefined;
  return [
    "## Gateway",
    "",
    "Gateway processes of their own (`test/kit/gatewayProcess.ts`: a `Gateway` with a JWT secret, " +
      "no Sweeper, pings off, rate limits raised so that frames are never refused, on its own " +
      "ioredis connection with the library's defaults), on the bench's Redis; the bench process " +
      "drives them over raw `ws` sockets (no client replica), each socket authenticated with its " +
      "own HS256 token. Process figures come from the gateway process itself over IPC " +
      "(`process.memoryUsage()` after two full collections, `process.cpuUsage()`).",
    "",
    ...idleSection(g.idle),
    `### Sockets held by one gateway process: ${number(s.sockets)} sockets, one room of ` +
      `${s.roomSize} each`,
    "",
    `Each socket opens (${number(s.sockets / s.openSeconds)} handshakes/s, ` +
      `${number(s.openSeconds, 1)} s), then joins its room with state \`{"status":"online"}\` ` +
      `(${number(s.sockets / s.joinSeconds)} joins/s, ${number(s.joinSeconds, 1)} s), ` +
      `${number(s.rooms)} rooms. The process is weighed warmed up with no socket, with every ` +
      "socket open, and with every socket in its room; bytes per socket are the differences ÷ " +
      "sockets.",
    "",
    table(
      ["bytes", "RSS", "heap used", "external", "array buffers"],
      [
        ["per open socket (handshake, session)", ...memoryCells(s.perSocket.open)],
        ["per join (room feed, subscription, heartbeat entry)", ...memoryCells(s.perSocket.join)],
        ["**per socket in its room**", ...memoryCells(s.perSocket.total)],
        ["process, no socket (MB)", ...memoryCells(s.base, MB, 1)],
        [`process, ${number(s.sockets)} sockets open (MB)`, ...memoryCells(s.opened, MB, 1)],
        [`process, ${number(s.sockets)} sockets joined (MB)`, ...memoryCells(s.joined, MB, 1)],
      ],
    ),
    "",
    `Redis for them: MEMORY USAGE of the deployment's keys ${number(s.keysPerSocket)} B per ` +
      `socket (${number(s.keys)} keys, ${number(s.keysMemoryUsage / MB, 1)} MB); used_memory Δ ` +
      `${number(s.redisPerSocket)} B per socket (${number(s.redisUsedMemory / MB, 1)} MB: the ` +
      "keyspace's own entries and the rooms' sharded subscriptions too, and client buffers, " +
      "which make it noisy for few sockets). The joins' kept replies are deleted first, as in " +
      "the memory section" +
      (engine === undefined
        ? "."
        : `; the engine alone, memory section (b) (a UUID connection per user, the same ` +
          `state) in rooms of ${s.roomSize}: MEMORY USAGE ` +
          `${number(engine.perConnection.memoryUsage)} B, used_memory ` +
          `${number(engine.perConnection.usedMemory)} B per connection.`),
    "",
    `### Fan-out across two gateway instances (µs): frame on instance A → event frame on instance B`,
    "",
    `Rooms of 9 before the newcomer (${g.fanout.rooms} rooms: 7 members present through the ` +
      "engine, a resident socket on A, a watcher socket on B), as the engine's fan-out above. " +
      "A newcomer's socket on A sends `join`, then `typing`, then `leave`, one frame at a time; " +
      "the time runs from the send to the arrival of the matching event frame on the watcher's " +
      "socket (both ends in the bench process, one clock). Baseline: the engine's fan-out in the " +
      "same run (call on one connection → event on a subscriber's), whose difference is the two " +
      "gateways' own share (frame parsing, the queue, the subscriber's relay, two WebSocket " +
      "hops).",
    "",
    table(
      [
        "event",
        ...PERCENTILES.map((p) => `gateways ${p}`),
        "samples",
        "engine p50",
        "engine p99",
        "gateways − engine, p50",
      ],
      g.fanout.results.map((f) => {
        const e = engineFanout(f.event);
        return [
          f.event,
          ...percentileCells(f.us),
          number(f.us.count),
          e ? number(e.us.p50) : "—",
          e ? number(e.us.p99) : "—",
          e ? number(f.us.p50 - e.us.p50) : "—",
        ];
      }),
    ),
    "",
    `### Heartbeat frames one gateway process sustains`,
    "",
    `${number(h.sockets)} sockets, each in ${h.roomsPerSocket} rooms (${number(h.rooms)} rooms ` +
      `of 10), each keeping ${h.inFlight} explicit \`heartbeat\` frames (with a ref) ` +
      "outstanding: the next goes as an ack comes back. A frame heartbeats every room of its " +
      `socket (${h.roomsPerSocket} room heartbeats; the frames of one event-loop turn go out ` +
      "together, one heartbeatMany per bucket). " +
      `Runs of ${number(h.runs[0]?.seconds ?? 0, 1)} s ` +
      `after a warm-up: ${h.runs.length}; CPU in ` +
      "shares of one core over the run (*bench* is the process driving the sockets, on the same " +
      `host: ${r.meta.cores} cores for the gateway, Redis, the bench and anything else).`,
    "",
    table(
      [
        "run",
        "frames/s",
        "script calls/s",
        "calls per frame",
        "gateway CPU",
        "redis-server CPU",
        "bench CPU",
        "host CPU, cores (others)",
        "gateway CPU µs / frame",
        "Redis CPU µs / call",
        "bounded by",
      ],
      h.runs.map((run, i) => [
        `${i + 1}${run === bestRun ? " (best)" : ""}`,
        number(run.framesPerSec),
        number(run.callsPerSec),
        number(run.calls / run.frames, 2),
        percent(run.gatewayCpu),
        percent(run.redisCpu),
        percent(run.benchCpu),
        `${number(run.hostCpu, 2)} of ${r.meta.cores} (${number(others(run), 2)})`,
        number((run.gatewayCpu * 1e6) / run.framesPerSec, 1),
        number((run.redisCpu * 1e6) / run.callsPerSec, 1),
        gatewayBound(run, r.meta.cores),
      ]),
    ),
    "",
    direct
      ? `Baseline: the engine called directly (heartbeat section, best run: ${describe(direct)}) ` +
        `sustains ${number(direct.opsPerSec)} heartbeats/s; through one gateway process, ` +
        `${number(roomBeats)} room heartbeats/s ` +
        `(${ratio(roomBeats / direct.opsPerSec)}) in ${number(bestRun.framesPerSec)} ` +
        "frames/s."
      : `Through one gateway process: ${number(roomBeats)} room heartbeats/s in ` +
        `${number(bestRun.framesPerSec)} frames/s.`,
    "",
    "### Script calls per heartbeat a gateway owes",
    "",
    `One gateway process with the default options (its own Sweeper included) but a ` +
      `${number(c.presenceWindowMs / 1000, 1)} s presence window, ${number(c.sockets)} sockets ` +
      `in ${number(c.rooms)} rooms, one each, heartbeating every room every third of the window ` +
      `by itself: over ${number(c.seconds, 1)} s Redis ran ${number(c.calls)} EVAL and EVALSHA ` +
      `calls for ${number(c.heartbeats)} (socket, room) heartbeats: ` +
      `**${number(c.callsPerHeartbeat, 3)} calls per heartbeat**, every script counted (the ` +
      `sweeps too); ${number(c.present)} connections present at the end.`,
  ].join("\n");
}

/**
 * Why the library keeps the log off by default, in this run's figures: each event costs little
 * more, but the log's memory is a fixed bound, whatever the size of the deployment.
 */
function logDefault(r: Results): string {
  const { extra, memory } = r.log;
  const presence = r.memory.rows
    .find((row) => row.roomSize === 20)
    ?.cells.find((c) => c.variant === "a")?.perConnection.memoryUsage;
  const mb = (bytes: number) => number(bytes / 1024 / 1024, 1);
  const scale = presence
    ? `: as much as the presence of about ${number(memory.boundBytes / presence)} connections ` +
      `in rooms of 20 (${number(presence)} B each, memory section)`
    : "";
  return (
    `Off by default: the log adds ${number(extra.redisCpuUs, 2)} µs of Redis CPU per event ` +
    `(${number(100 * extra.redisCpuShare)}%), little, but it holds up to about ` +
    `${mb(memory.boundBytes)} MB at this logLength${scale}. Turn it on where a server ` +
    "consumer needs every event."
  );
}

export function logSection(r: Results): string {
  const l = r.log;
  const m = l.memory;
  const mb = (bytes: number) => number(bytes / MB, 1);
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
    `**${logDefault(r)}**`,
  ].join("\n");
}

const STEADY_LABEL: Record<SteadyVariant, (r: Results) => string> = {
  plain: () => "no grace, no capacity",
  grace: (r) => `leaveGraceMs ${number(r.grace.leaveGraceMs)}`,
  capacity: (r) => `capacity ${r.grace.capacity}`,
};

export function graceSection(r: Results): string {
  const g = r.grace;
  const st = g.steady;
  const of = (v: SteadyVariant) => st.summary.find((s) => s.variant === v)!;
  const join = g.join.variants;
  const [none, capped, refused] = join;
  const [plain, graced] = g.reload.variants;
  const change = (from: number, to: number) =>
    `${number(from, 2)} → ${number(to, 2)} µs (${ratio(to / from)})`;
  return [
    "## Leave grace and room capacity on the heartbeat path",
    "",
    "### (a), (b) Steady heartbeats: redis-benchmark, Redis time per call",
    "",
    `As the ceiling: ${st.roomSize} rooms of ${st.roomSize} users in a deployment of one ` +
      `bucket, \`-c ${st.config.clients} -P ${st.config.pipeline} -n ` +
      `${number(st.config.requests)}\`, the command of a real steady heartbeat captured with ` +
      "MONITOR in each variant: a deployment with no grace, one with " +
      `\`leaveGraceMs: ${number(g.leaveGraceMs)}\`, and the first deployment's heartbeat with ` +
      `\`capacity: ${g.capacity}\`. Interleaved, the order turning each repeat; each run is ` +
      "checked to run exactly TIME, HMGET, HSET per call. *÷ plain* is the median of each " +
      "repeat's ratio.",
    "",
    table(
      ["variant", "script µs / call", "÷ plain", "Redis CPU µs / call", "best calls/s"],
      STEADY_VARIANTS.map((v) => [
        STEADY_LABEL[v](r),
        number(of(v).usPerCall, 2),
        ratio(of(v).ratio),
        number(of(v).redisCpuUs, 2),
        number(of(v).bestOpsPerSec),
      ]),
    ),
    "",
    "```",
    ...st.commands.map((c) => c.command.map((a) => (a === "" ? '""' : a)).join(" ")),
    "```",
    "",
    "### (c) The join path: a newcomer into a room of " + g.join.roomSize,
    "",
    `In each of ${number(g.join.rooms)} rooms of ${g.join.roomSize}, a newcomer's heartbeat ` +
      "(16 in flight, one auto-pipelined connection), then its leave (not measured); the " +
      "variants alternate phase by phase. Per call: Redis's time in EVALSHA, redis-server's " +
      "CPU, events published, writing commands run on presence (HSET, HINCRBY, ZADD, PEXPIRE, " +
      "…: a join writes the record, the counts, the due entry and the keys' expiry) and calls " +
      "that kept their reply for a resend (an APPEND and a PEXPIRE of the replay string, not " +
      "counted as presence writes).",
    "",
    table(
      [
        "variant",
        "calls",
        "script µs / call",
        "Redis CPU µs / call",
        "events / call",
        "writing commands / call",
        "kept replies / call",
      ],
      join.map((v) => [
        v.variant,
        number(v.calls),
        number(v.scriptUs, 2),
        number(v.redisCpuUs, 2),
        number(v.events, 2),
        number(v.writes, 2),
        number(v.keptReplies, 2),
      ]),
    ),
    "",
    "### (d) A page reload: the leave, then a new connection",
    "",
    `In each of ${number(g.reload.rooms)} rooms of ${g.reload.roomSize}, one user's connection ` +
      "leaves and a new one of the same user heartbeats (all leaves, then all new connections, " +
      "well within the grace), in a deployment without a grace and one with " +
      `\`leaveGraceMs: ${number(g.leaveGraceMs)}\`. Without a grace the room hears a leave and ` +
      "a join; within it, nothing. Not counted: the record in its grace leaves the room's due " +
      "entry at the grace's end, so a Sweeper visits the room once then and finds nothing (see " +
      "the live rooms' cost per visit).",
    "",
    table(
      [
        "leaveGraceMs",
        "reloads",
        "leave µs",
        "new connection µs",
        "script µs / reload",
        "Redis CPU µs / reload",
        "events / reload",
      ],
      g.reload.variants.map((v) => [
        number(v.leaveGraceMs),
        number(v.reloads),
        number(v.leaveUs, 2),
        number(v.rejoinUs, 2),
        number(v.scriptUs, 2),
        number(v.redisCpuUs, 2),
        number(v.events, 2),
      ]),
    ),
    "",
    `In one line: a steady heartbeat's script time ${change(of("plain").usPerCall, of("grace").usPerCall)} ` +
      `with the grace, ${change(of("plain").usPerCall, of("capacity").usPerCall)} with a capacity; ` +
      `a join ${change(none!.scriptUs, capped!.scriptUs)} with a capacity, and a refusal from a ` +
      `full room costs ${number(refused!.scriptUs, 2)} µs; a reload ` +
      `${change(plain!.scriptUs, graced!.scriptUs)} of script time with the grace, publishing ` +
      `${number(graced!.events)} events instead of ${number(plain!.events)}.`,
  ].join("\n");
}
