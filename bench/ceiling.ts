import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Rollcall } from "../src/rollcall.js";
import { forEachInFlight } from "./drive.js";
import { members, STEADY } from "./population.js";
import type { Lab } from "./lab.js";
import { commandStats, commandsBetween, underLoad, type Load } from "./stats.js";

const run = promisify(execFile);

export interface CeilingConfig {
  clients: number;
  pipeline: number;
  requests: number;
}

export interface CeilingRun extends CeilingConfig {
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  load: Load;
}

export interface CeilingResults {
  redisBenchmark: string;
  /** The command redis-benchmark sent, as captured from a real heartbeat. */
  command: string[];
  /** Every run, each configuration once per throughput repeat. */
  runs: CeilingRun[];
}

/** redis-benchmark expands this in an argument to a 12-digit number below -r. */
const RANDOM = "__rand_int__";

/**
 * What one Redis core can do: redis-benchmark, a C client with pipelining, sends rollcall's own
 * heartbeat script with the exact KEYS and ARGV a real heartbeat sends, each call refreshing one
 * of `users` present users picked at random.
 */
export class Ceiling {
  private constructor(
    private readonly lab: Lab,
    private readonly users: number,
    readonly command: string[],
    readonly version: string,
  ) {}

  /** Makes the users present in a room of their own and captures a heartbeat's command. */
  static async prepare(lab: Lab, users: number): Promise<Ceiling> {
    const present = members(1, users, "ceiling").map((m, i) => ({ ...m, user: userId(i) }));
    const client = lab.connect({ enableAutoPipelining: true });
    const rollcall = new Rollcall(client, STEADY);
    await forEachInFlight(present, 64, (m) => rollcall.heartbeat(m.room, m.user, m.connection));
    const command = await captureHeartbeat(lab, rollcall, present[0]!);
    lab.release(client);
    const { stdout: version } = await run("redis-benchmark", ["--version"]);
    return new Ceiling(lab, users, command, version.trim());
  }

  async run({ clients, pipeline, requests }: CeilingConfig): Promise<CeilingRun> {
    const args = ["-u", this.lab.url, "-c", `${clients}`, "-P", `${pipeline}`, "-n", `${requests}`];
    args.push("-r", `${this.users}`, "--csv", "-q", ...this.command);
    const before = await commandStats(this.lab.admin);
    const [{ stdout }, load] = await underLoad(this.lab.admin, () => run("redis-benchmark", args));
    checkAllRan(commandsBetween(before, await commandStats(this.lab.admin)), requests);
    return { clients, pipeline, requests, ...parseCsv(stdout), load };
  }
}

function userId(i: number): string {
  return `u${String(i).padStart(12, "0")}`;
}

/**
 * The wire form of a steady heartbeat, seen through MONITOR: EVALSHA, the SHA of the script as the
 * loader built it, and every key and argument. The user becomes redis-benchmark's random number.
 */
async function captureHeartbeat(
  lab: Lab,
  rollcall: Rollcall,
  member: { room: string; user: string; connection: string },
): Promise<string[]> {
  const monitor = lab.track(await lab.admin.monitor());
  const seen = new Promise<string[]>((resolve) => {
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (source !== "lua" && args[0]?.toLowerCase() === "evalsha") resolve(args);
    });
  });
  // The connection has run the script already, so ioredis sends EVALSHA rather than EVAL.
  await rollcall.heartbeat(member.room, member.user, member.connection);
  const args = await seen;
  lab.release(monitor);
  if (args.filter((a) => a === member.user).length !== 1) {
    throw new Error(`cannot find the user once in the heartbeat command ${args.join(" ")}`);
  }
  const [loaded] = (await lab.admin.script("EXISTS", args[1]!)) as number[];
  if (loaded !== 1) throw new Error(`script ${args[1]} is not loaded`);
  return args.map((a) => (a === member.user ? `u${RANDOM}` : a));
}

/** redis-benchmark reports an error reply as a request like any other: make sure none failed. */
function checkAllRan(ran: ReturnType<typeof commandsBetween>, requests: number): void {
  const evalsha = ran.get("evalsha");
  if (!evalsha || evalsha.calls < requests || evalsha.failed > 0) {
    throw new Error(`redis-benchmark: ${JSON.stringify(evalsha)} for ${requests} requests`);
  }
}

/** `--csv -q` prints a header line and one quoted row per test. */
function parseCsv(stdout: string): { opsPerSec: number; p50Ms: number; p99Ms: number } {
  const [header, row] = stdout
    .trim()
    .split("\n")
    .map((line) => [...line.matchAll(/"([^"]*)"/g)].map((m) => m[1]!));
  if (!header || !row) throw new Error(`unexpected redis-benchmark output: ${stdout}`);
  const field = (name: string) => {
    const value = Number(row[header.indexOf(name)]);
    if (!Number.isFinite(value)) throw new Error(`no ${name} in redis-benchmark output: ${stdout}`);
    return value;
  };
  return {
    opsPerSec: field("rps"),
    p50Ms: field("p50_latency_ms"),
    p99Ms: field("p99_latency_ms"),
  };
}
