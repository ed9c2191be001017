import { Cluster, Redis } from "ioredis";
import { deploymentKey, storedSettings } from "../engine/deployment.js";
import { REDIS_OPTIONS } from "../engine/redisOptions.js";
import { Rollcall } from "../engine/rollcall.js";
import type { Client } from "../engine/script.js";
import { deploymentFields, resolveSettings, type RollcallOptions } from "../engine/settings.js";
import { InvalidInputError } from "../protocol/errors.js";
import type { Target } from "./args.js";
import { CliError } from "./errors.js";

/** Connection attempts before the CLI gives up on a Redis it cannot reach. */
const ATTEMPTS = 3;
const CONNECT_TIMEOUT_MS = 3_000;
/** ioredis waits this long (2 s by default) for a socket it closed to close: it delays exits. */
const DISCONNECT_TIMEOUT_MS = 200;
/** However the attempts go, a command never waits longer than this for its first connection. */
const GIVE_UP_MS = 20_000;

export interface ConnectOptions {
  /** Keep reconnecting once connected (a watch), instead of failing after a few attempts. */
  persistent?: boolean;
}

/** Where the target is, in words, for messages. */
export function targetName(target: Target): string {
  return "url" in target
    ? redacted(target.url)
    : `the cluster at ${target.nodes.map((n) => `${n.host}:${n.port}`).join(",")}`;
}

/**
 * A connected client, or a CliError saying why there is none, within seconds. Its calls settle
 * within REDIS_OPTIONS's command timeout, as a library user's do.
 */
export async function connect(target: Target, options: ConnectOptions = {}): Promise<Client> {
  let connected = false;
  // Before the first connection, a few quick attempts: an unreachable Redis is an error now, not
  // a hang. A persistent client then reconnects for as long as it runs.
  const retry = (times: number) =>
    connected && options.persistent
      ? Math.min(100 * 2 ** times, 2_000)
      : times > ATTEMPTS
        ? null
        : 200 * times;
  const client: Client =
    "url" in target
      ? new Redis(target.url, {
          ...REDIS_OPTIONS,
          lazyConnect: true,
          connectTimeout: CONNECT_TIMEOUT_MS,
          disconnectTimeout: DISCONNECT_TIMEOUT_MS,
          maxRetriesPerRequest: 1,
          retryStrategy: retry,
        })
      : new Cluster([...target.nodes], {
          lazyConnect: true,
          clusterRetryStrategy: retry,
          redisOptions: {
            ...REDIS_OPTIONS,
            connectTimeout: CONNECT_TIMEOUT_MS,
            disconnectTimeout: DISCONNECT_TIMEOUT_MS,
            maxRetriesPerRequest: 1,
          },
        });
  let lastError: Error | undefined;
  // Failures surface through the commands; unheard, ioredis would print each one to the console.
  client.on("error", (error: Error) => (lastError = error));
  try {
    await whenReady(client);
  } catch {
    // Once ended there is nothing to close; disconnect() would then wait out a 2 s timer.
    if (client.status !== "end") client.disconnect();
    const why = lastError?.message ?? "no answer";
    throw new CliError(1, `cannot reach ${targetName(target)}: ${why}`);
  }
  connected = true;
  return client;
}

function whenReady(client: Client): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: Error) => {
      clearTimeout(timer);
      client.off("ready", onReady);
      client.off("end", onEnd);
      if (error) reject(error);
      else resolve();
    };
    const onReady = () => done();
    const onEnd = () => done(new Error("connection ended"));
    const timer = setTimeout(() => done(new Error("timed out")), GIVE_UP_MS);
    client.once("ready", onReady);
    client.once("end", onEnd);
    // It rejects on the first failed attempt, while retries go on: 'ready' and 'end' tell.
    client.connect().catch(() => undefined);
  });
}

/**
 * A Rollcall on the deployment's own stored settings, checked by ready(): nothing to repeat, and
 * nothing stored by accident, since the CLI never runs where no instance has.
 */
export async function deploymentRollcall(
  client: Client,
  prefix: string,
  options: Pick<RollcallOptions, "rosterLimit"> = {},
): Promise<Rollcall> {
  const stored = await storedSettings(client, prefix);
  const key = deploymentKey(prefix);
  if (stored.length === 0) throw noDeployment(prefix);
  // Every field a deployment may store (userStatus only when it is on).
  const all = deploymentFields(resolveSettings({ userStatus: true }));
  const shared = new Set(all.filter((_, i) => i % 2 === 0));
  shared.delete("layout");
  const settings: Record<string, number | boolean> = {};
  for (let i = 0; i + 1 < stored.length; i += 2) {
    const [name, value] = [stored[i]!, stored[i + 1]!];
    if (shared.has(name)) settings[name] = name === "userStatus" ? value === "true" : Number(value);
  }
  let rollcall: Rollcall;
  try {
    rollcall = new Rollcall(client, { ...settings, ...options, prefix });
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    throw new CliError(1, `the settings stored in ${key} are not usable: ${error.message}`);
  }
  // An evicting Redis (rollcall check fails it): one line on stderr, as the CLI says things.
  rollcall.on("warning", (warning) => process.stderr.write(`rollcall: ${warning.message}\n`));
  await rollcall.ready(); // also compares the layout version this CLI was built for
  return rollcall;
}

/** Nothing is stored under the prefix: a usage error (exit 2), most likely the wrong place. */
export function noDeployment(prefix: string): CliError {
  return new CliError(
    2,
    `no deployment here: ${deploymentKey(prefix)} is empty (no rollcall instance has run with prefix ${prefix}; see --prefix, --redis, --cluster)`,
  );
}

/** Connects, runs, and always disconnects. */
export async function withClient<T>(
  target: Target,
  use: (client: Client) => Promise<T>,
  options?: ConnectOptions,
): Promise<T> {
  const client = await connect(target, options);
  try {
    return await use(client);
  } finally {
    client.disconnect();
  }
}

/** A URL without its password, for messages. */
function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}
