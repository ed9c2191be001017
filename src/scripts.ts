import { readdirSync, readFileSync } from "node:fs";
import type { Cluster, Redis } from "ioredis";
import { RedisCallError, UnexpectedReplyError } from "./errors.js";

export type Client = Redis | Cluster;

/** Every operation rollcall runs in Redis: one file `lua/<name>-<numberOfKeys>.lua` each. */
export const SCRIPT_NAMES = [
  "heartbeat",
  "leave",
  "startTyping",
  "stopTyping",
  "setState",
  "roster",
  "sweep",
  "sweepRoom",
] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

interface Source {
  readonly lua: string;
  readonly numberOfKeys: number;
}

const LUA_DIR = new URL("../lua/", import.meta.url);
const FILE_NAME = /^([a-z][A-Za-z]*)-(\d+)\.lua$/;
const INCLUDE = /^-- @include "([a-zA-Z]+)"$/gm;

function read(file: string): string {
  return readFileSync(new URL(file, LUA_DIR), "utf8");
}

/** Reads lua/ once: names and key counts from the file names, `-- @include` lines expanded. */
function loadSources(): ReadonlyMap<string, Source> {
  const files = readdirSync(LUA_DIR).filter((f) => f.endsWith(".lua"));
  if (files.length === 0) throw new Error(`rollcall: no Lua scripts in ${LUA_DIR.pathname}`);
  const sources = new Map<string, Source>();
  for (const file of files) {
    const match = FILE_NAME.exec(file);
    if (!match) throw new Error(`rollcall: Lua file ${file} is not named <name>-<keys>.lua`);
    const lua = read(file).replace(INCLUDE, (_, name: string) => read(`include/${name}.lua`));
    sources.set(match[1]!, { lua, numberOfKeys: Number(match[2]) });
  }
  for (const name of SCRIPT_NAMES) {
    if (!sources.has(name)) throw new Error(`rollcall: lua/${name}-N.lua is missing`);
  }
  return sources;
}

let sources: ReadonlyMap<string, Source> | undefined;

type Command = (...args: (string | number)[]) => Promise<unknown>;

/**
 * The one typed boundary between TypeScript and the scripts: defines them on the client under
 * namespaced names, calls them, and turns failures into typed errors.
 */
export class Scripts {
  constructor(private readonly client: Client) {
    sources ??= loadSources();
    for (const [name, { lua, numberOfKeys }] of sources) {
      client.defineCommand(commandName(name), { lua, numberOfKeys });
    }
  }

  /** Runs one script; the reply is an array (every rollcall script replies with one). */
  async run(
    name: ScriptName,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown[]> {
    const command = (this.client as unknown as Record<string, Command>)[commandName(name)]!;
    let reply: unknown;
    try {
      reply = await command.call(this.client, ...keys, ...args);
    } catch (error) {
      throw new RedisCallError(name, error);
    }
    if (!Array.isArray(reply)) throw new UnexpectedReplyError(`reply of ${name}`, reply);
    return reply as unknown[];
  }
}

function commandName(name: string): string {
  return `rollcall_${name}`;
}

/** An integer from a script reply (RESP integers arrive as numbers, strings are coerced). */
export function int(reply: unknown[], index: number): number {
  const value = reply[index];
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isSafeInteger(n)) {
    throw new UnexpectedReplyError(`integer at ${index}`, reply);
  }
  return n;
}

export function str(reply: unknown[], index: number): string {
  const value = reply[index];
  if (typeof value !== "string") throw new UnexpectedReplyError(`string at ${index}`, reply);
  return value;
}
