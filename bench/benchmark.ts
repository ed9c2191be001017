import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Lab } from "./lab.js";
import { commandStats, resetStats, underLoad, type Load } from "./stats.js";

const exec = promisify(execFile);

/** How redis-benchmark drives Redis: clients (connections), commands pipelined on each, total. */
export interface BenchmarkConfig {
  clients: number;
  pipeline: number;
  requests: number;
}

export interface BenchmarkRun {
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Redis's time per script call, commands inside included (INFO commandstats), µs. */
  usPerCall: number;
  load: Load;
}

/**
 * What one call of a script must run, exactly: name → calls per script call. Anything else
 * means the run did not measure what it claims (a heartbeat that was not steady publishes,
 * a user that was not there gets added), and the run fails.
 */
export type Expected = Record<string, number>;

/** Commands of the bench's own clients and of redis-benchmark's start-up: not the script's. */
const ADMIN = /^(info|dbsize|ping|hello|select|auth|command(\|.*)?|config\|.*|client\|.*)$/;

export async function redisBenchmarkVersion(): Promise<string> {
  const { stdout } = await exec("redis-benchmark", ["--version"]);
  return stdout.trim();
}

/** Loads a script into Redis's script cache; its SHA is what redis-benchmark sends. */
export async function loadScript(lab: Lab, lua: string): Promise<string> {
  return (await lab.admin.script("LOAD", lua)) as string;
}

/**
 * redis-benchmark sending one EVALSHA command `requests` times; `__rand_int__` in the command is
 * drawn below `range`, independently at each occurrence. INFO statistics are reset first, so
 * commandstats then hold this run alone: the script's time per call, and every command it ran,
 * checked against `expected`. The keyspace must keep its size.
 */
export async function benchmarkScript(
  lab: Lab,
  { clients, pipeline, requests }: BenchmarkConfig,
  range: number,
  command: readonly string[],
  expected: Expected,
): Promise<BenchmarkRun> {
  const args = ["-u", lab.url, "-c", `${clients}`, "-P", `${pipeline}`, "-n", `${requests}`];
  args.push("-r", `${range}`, "--csv", "-q", ...command);
  const keys = await lab.admin.dbsize();
  await lab.collectLuaGarbage();
  await resetStats(lab.admin);
  const [{ stdout }, load] = await underLoad(lab.admin, () => exec("redis-benchmark", args));
  const ran = await commandStats(lab.admin);
  const after = await lab.admin.dbsize();
  const what = `redis-benchmark ${command.slice(0, 2).join(" ")}…`;
  if (after !== keys) throw new Error(`${what} changed the number of keys: ${keys} → ${after}`);
  const calls = ran.get("evalsha");
  if (!calls || calls.calls < requests || calls.failed > 0) {
    throw new Error(`${what}: evalsha ${JSON.stringify(calls)} for ${requests} requests`);
  }
  for (const [name, stat] of ran) {
    if (name === "evalsha" || ADMIN.test(name)) continue;
    const perCall = expected[name];
    if (perCall === undefined || stat.calls !== perCall * calls.calls || stat.failed > 0) {
      throw new Error(
        `${what}: the script ran ${name} ${stat.calls} times in ${calls.calls} calls ` +
          `(expected ${JSON.stringify(expected)})`,
      );
    }
  }
  for (const name of Object.keys(expected)) {
    if (!ran.has(name)) throw new Error(`${what}: the script never ran ${name}`);
  }
  return { ...parseCsv(stdout), usPerCall: calls.usec / calls.calls, load };
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
