import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";

/** One script of lua/, its includes expanded, ready for `defineCommand`. */
export interface LuaScript {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly lua: string;
  /** SHA-1 of the expanded source: names the command, so two releases never share one. */
  readonly sha: string;
}

export const LUA_DIR = new URL("../../lua/", import.meta.url);
const FILE_NAME = /^([a-z][A-Za-z]*)-(\d+)\.lua$/;
const INCLUDE_LINE = /^-- @include\b.*$/gm;
const INCLUDE = /^-- @include "([A-Za-z]+)"$/;

function includesOf(source: string, where: string): string[] {
  return (source.match(INCLUDE_LINE) ?? []).map((line) => {
    const name = INCLUDE.exec(line)?.[1];
    if (!name) throw new Error(`rollcall: ${where}: malformed include line ${line}`);
    return name;
  });
}

/**
 * A script with each `-- @include` line replaced by that include, once (a later line naming it
 * again adds nothing), itself preceded by the includes it names, whatever order they are listed
 * in. So a script can define the helpers a slow path needs after its fast path has returned.
 * Unknown names and cycles are errors.
 */
export function expandIncludes(
  source: string,
  where: string,
  readInclude: (name: string) => string | undefined,
): string {
  const emitted = new Set<string>();
  const path: string[] = [];
  const expand = (text: string, from: string): string =>
    text.replace(INCLUDE_LINE, (line) => {
      const name = includesOf(line, from)[0]!;
      if (emitted.has(name)) return "";
      if (path.includes(name)) {
        throw new Error(`rollcall: include cycle ${[...path, name].join(" -> ")}`);
      }
      const body = readInclude(name);
      if (body === undefined) throw new Error(`rollcall: ${from} includes unknown "${name}"`);
      path.push(name);
      const expanded = expand(body, `include/${name}.lua`);
      path.pop();
      emitted.add(name);
      return expanded;
    });
  return expand(source, where);
}

/** Reads include/<name>.lua of a folder of scripts (or its replacement): undefined if none. */
export function includeReader(
  dir: URL,
  replaced: Readonly<Record<string, string>> = {},
): (name: string) => string | undefined {
  return (name) => {
    if (Object.hasOwn(replaced, name)) return replaced[name];
    try {
      return readFileSync(new URL(`include/${name}.lua`, dir), "utf8");
    } catch {
      return undefined;
    }
  };
}

const FLAGS = /^#!lua\b.*\n/;
const AT_LIMIT = "\nlocal atLimit = false\n";

/**
 * The variant for Redis at maxmemory of a script that says `local atLimit = false`: the same
 * script allowed to run there (`flags=allow-oom`, in place of its own flags if it has any) and
 * told so by atLimit, to do there only what does not grow memory, or without what Redis refuses
 * there. Undefined for any other script.
 */
function atLimitVariant(name: string, lua: string): [string, string] | undefined {
  if (!lua.includes(AT_LIMIT)) return undefined;
  const allowed = "#!lua flags=allow-oom\n" + lua.replace(FLAGS, "");
  return [`${name}AtLimit`, allowed.replace(AT_LIMIT, "\nlocal atLimit = true\n")];
}

/**
 * Reads a folder of scripts: names and key counts from the file names, includes expanded, and
 * the variant at the memory limit of those that have one (`<name>AtLimit`). An include named in
 * `replaced` is taken from there instead of include/<name>.lua.
 */
export function loadScripts(
  dir: URL = LUA_DIR,
  replaced: Readonly<Record<string, string>> = {},
): ReadonlyMap<string, LuaScript> {
  const files = readdirSync(dir).filter((f) => f.endsWith(".lua"));
  if (files.length === 0) throw new Error(`rollcall: no Lua scripts in ${dir.pathname}`);
  const readInclude = includeReader(dir, replaced);
  const scripts = new Map<string, LuaScript>();
  for (const file of files) {
    const match = FILE_NAME.exec(file);
    if (!match) throw new Error(`rollcall: Lua file ${file} is not named <name>-<keys>.lua`);
    const lua = expandIncludes(readFileSync(new URL(file, dir), "utf8"), file, readInclude);
    const variant = atLimitVariant(match[1]!, lua);
    for (const [name, source] of [[match[1]!, lua], ...(variant ? [variant] : [])]) {
      const sha = createHash("sha1").update(source!).digest("hex");
      scripts.set(name!, { name: name!, numberOfKeys: Number(match[2]), lua: source!, sha });
    }
  }
  return scripts;
}
