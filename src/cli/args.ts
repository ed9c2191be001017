import { parseArgs } from "node:util";
import { InvalidInputError } from "../protocol/errors.js";
import { resolveSettings } from "../engine/settings.js";
import { STATUS_LIMIT } from "../engine/users.js";
import { badValue, usageError } from "./errors.js";

export const USAGE = `Usage: rollcall [--redis URL | --cluster HOST:PORT,...] [--prefix P] COMMAND [ARGS]

Looks into a rollcall deployment in Redis. Its settings (buckets, windows, key TTL, log length)
are read from <prefix>:deployment, as every instance stores them, so they are never repeated here.

Commands:
  roster ROOM [--json]  the room's members as a table, or roster() as JSON
  watch ROOM            a live tail of the room's events, each with the roster after it (Ctrl-C ends)
  status USER... [--json]
                        whether each user is online anywhere, since when, and when last seen (at
                        most ${STATUS_LIMIT} users), as a table, or status() as JSON
  stats [--json]        rooms, users, connections, typing, due backlog and sweeper lag per bucket
  sweep                 one sweeper pass: expires and announces everything overdue
  settings [--json]     the settings stored in <prefix>:deployment, and whether the deployment is
                        in use (a room, a connection or an overdue room counted in its buckets)
  settings --delete     deletes them, unless the deployment is in use: the next instance to start
                        stores its own
  check [SETTINGS] [--reconcile]
                        compares settings with the deployment's, storing nothing; SETTINGS are
                        --presence-window-ms N --typing-window-ms N --buckets N --key-ttl-ms N
                        --leave-grace-ms N --log-length N --user-status, the library's defaults for
                        those not given;
                        --reconcile then counts every room anew (after keys expired unannounced,
                        or data was lost) and prints the counts before and after

Options:
  --redis URL           a single Redis, redis:// or rediss:// (default: $REDIS_URL, else
                        redis://127.0.0.1:6379)
  --cluster NODES       a Redis Cluster instead, by some of its nodes: host:port,host:port
  --prefix P            the deployment's prefix (default: rollcall)
  -h, --help            this text
  -v, --version         the version

Exit status: 0 done (check: the settings agree, or none are stored yet); 1 a failure, check
found a difference, or settings --delete found the deployment in use; 2 a usage error, or no
deployment stored under the prefix.
Times and ages are Redis's (TIME), never this machine's; watch prints them in UTC.
`;

const GLOBAL = {
  redis: { type: "string" },
  cluster: { type: "string" },
  prefix: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
} as const;

/** check's options, as RollcallOptions names them. */
export const CHECKED = {
  "presence-window-ms": "presenceWindowMs",
  "typing-window-ms": "typingWindowMs",
  buckets: "buckets",
  "key-ttl-ms": "keyTtlMs",
  "leave-grace-ms": "leaveGraceMs",
  "log-length": "logLength",
} as const;

const COMMANDS = {
  roster: { args: ["ROOM"], options: ["json"] },
  watch: { args: ["ROOM"], options: [] },
  status: { args: ["USER..."], options: ["json"], list: { most: STATUS_LIMIT, of: "users" } },
  stats: { args: [], options: ["json"] },
  sweep: { args: [], options: [] },
  settings: { args: [], options: ["json", "delete"] },
  check: { args: [], options: [...Object.keys(CHECKED), "user-status", "reconcile"] },
} as const satisfies Record<
  string,
  {
    args: readonly string[];
    options: readonly string[];
    /** The last argument is a list of one or more: how long it may be (the library's limit). */
    list?: { most: number; of: string };
  }
>;

export type CommandName = keyof typeof COMMANDS;

// Every command's options in one table, so one strict parse sees them all wherever they are
// placed; which command may take which is checked after.
const OPTIONS = {
  ...GLOBAL,
  json: { type: "boolean" },
  reconcile: { type: "boolean" },
  delete: { type: "boolean" },
  "presence-window-ms": { type: "string" },
  "typing-window-ms": { type: "string" },
  buckets: { type: "string" },
  "key-ttl-ms": { type: "string" },
  "leave-grace-ms": { type: "string" },
  "log-length": { type: "string" },
  "user-status": { type: "boolean" },
} as const;

/** Where the deployment lives: a single Redis by its URL, or a Cluster by some of its nodes. */
export type Target = { readonly prefix: string } & (
  { readonly url: string } | { readonly nodes: readonly { host: string; port: number }[] }
);

export type Invocation = { readonly kind: "help" } | { readonly kind: "version" } | Command;

/** A command to run, as the command line gave it. */
export interface Command {
  readonly kind: "command";
  readonly command: CommandName;
  /** The command's positional arguments (ROOM, or status's users). */
  readonly args: readonly string[];
  readonly json: boolean;
  /** check: count every room anew after the comparison. */
  readonly reconcile: boolean;
  /** settings: delete them (--delete). */
  readonly remove: boolean;
  /** check's settings, by RollcallOptions name. */
  readonly settings: Partial<Record<(typeof CHECKED)[keyof typeof CHECKED], number>> & {
    userStatus?: boolean;
  };
  readonly target: Target;
}

/** Reads a command line (without node and the script); a usage error is a CliError with exit 2. */
export function parseCommandLine(argv: readonly string[]): Invocation {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
      tokens: true,
    });
  } catch (error) {
    // Node's parser explains how to pass a positional starting with '-': not what went wrong.
    throw usageError(
      String((error as Error).message).replace(/\. To specify a positional.*$/s, ""),
    );
  }
  const { values, positionals, tokens } = parsed;
  if (values.help) return { kind: "help" };
  if (values.version) return { kind: "version" };

  const [name, ...args] = positionals;
  if (name === undefined) throw usageError("no command given");
  if (!Object.hasOwn(COMMANDS, name)) throw usageError(`unknown command ${JSON.stringify(name)}`);
  const command = name as CommandName;
  const spec = COMMANDS[command];
  for (const token of tokens) {
    if (token.kind !== "option" || token.name in GLOBAL) continue;
    if (!(spec.options as readonly string[]).includes(token.name)) {
      throw usageError(`${command} takes no option ${token.rawName}`);
    }
  }
  const list = "list" in spec ? spec.list : undefined;
  if (args.length < spec.args.length || (list === undefined && args.length > spec.args.length)) {
    throw usageError(
      spec.args.length === 0
        ? `${command} takes no argument`
        : `${command} takes ${spec.args.join(" ")}`,
    );
  }
  if (list !== undefined && args.length > list.most) {
    throw usageError(`${command} takes at most ${list.most} ${list.of}, got ${args.length}`);
  }

  const settings: Record<string, number | boolean> = {};
  if (values["user-status"] === true) settings.userStatus = true;
  for (const [flag, option] of Object.entries(CHECKED)) {
    const text = values[flag as keyof typeof CHECKED];
    if (text === undefined) continue;
    if (!/^\d{1,15}$/.test(text)) throw badValue(`--${flag} takes a whole number, got ${text}`);
    settings[option] = Number(text);
  }
  return {
    kind: "command",
    command,
    args,
    json: values.json === true,
    reconcile: values.reconcile === true,
    remove: values.delete === true,
    settings,
    target: target(values),
  };
}

function target(values: { redis?: string; cluster?: string; prefix?: string }): Target {
  if (values.redis !== undefined && values.cluster !== undefined) {
    throw usageError("--redis and --cluster exclude each other");
  }
  const prefix = checkedPrefix(values.prefix ?? "rollcall");
  if (values.cluster === undefined) {
    const url =
      values.redis !== undefined
        ? redisUrl(values.redis, "--redis")
        : process.env.REDIS_URL
          ? redisUrl(process.env.REDIS_URL, "REDIS_URL")
          : "redis://127.0.0.1:6379";
    return { url, prefix };
  }
  const nodes = values.cluster.split(",").map((node) => {
    const at = node.lastIndexOf(":");
    const [host, port] = [node.slice(0, at).replace(/^\[(.*)\]$/, "$1"), node.slice(at + 1)];
    if (at <= 0 || !/^\d{1,5}$/.test(port) || Number(port) > 65_535) {
      throw badValue(`--cluster takes host:port,host:port,..., got ${JSON.stringify(node)}`);
    }
    return { host, port: Number(port) };
  });
  return { nodes, prefix };
}

/** A URL ioredis connects to as a Redis URL: anything else it would take for a socket path. */
function redisUrl(url: string, from: string): string {
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {
    // not a URL at all
  }
  if (protocol !== "redis:" && protocol !== "rediss:") {
    throw badValue(`${from} takes a redis:// or rediss:// URL, got ${JSON.stringify(url)}`);
  }
  return url;
}

/** The library's own rule for prefixes, so that a typo is a usage error, not an empty result. */
function checkedPrefix(prefix: string): string {
  try {
    return resolveSettings({ prefix }).prefix;
  } catch (error) {
    if (error instanceof InvalidInputError) throw badValue(error.message);
    throw error;
  }
}
