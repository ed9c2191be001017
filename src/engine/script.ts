import type { Cluster, Redis } from "ioredis";
import { UnexpectedReplyError } from "../protocol/errors.js";
import { RedisCallError, refusedAtLimit } from "./errors.js";
import type { EventId } from "../protocol/events.js";
import { LUA_DIR, loadScripts, type LuaScript } from "./loader.js";

export type Client = Redis | Cluster;
export type Arg = string | number | Buffer;

/**
 * One operation run in Redis: the file lua/<name>-<keys>.lua, how its own arguments are encoded
 * and how its reply is read. Each lives in a module of engine/scripts/.
 */
export interface Script<Input, Output> {
  readonly name: string;
  /** The script's outcomes by code (0, 1, …), named as lua/<name>-N.lua names them. */
  readonly outcomes?: readonly string[];
  /** Its reply holds binary strings: they come as Buffers (read with Reply.str where text). */
  readonly binary?: boolean;
  args(input: Input): Arg[];
  /**
   * Plain commands run right after the script in the same MULTI, so that they see what it saw
   * (their replies are Reply.reads): a bulk read Redis answers natively, where a script would
   * convert every field to Lua and back.
   */
  reads?(input: Input): (readonly [command: string, ...args: Arg[]])[];
  decode(reply: Reply, input: Input): Output;
}

/** A script's reply, read field by field; a field of the wrong shape is an UnexpectedReplyError. */
export class Reply {
  constructor(
    private readonly script: string,
    readonly values: readonly unknown[],
    /** The replies of the script's `reads`, in order. */
    readonly reads: readonly unknown[] = [],
  ) {}

  get length(): number {
    return this.values.length;
  }

  /** An integer (RESP integers arrive as numbers; strings are coerced, floats refused). */
  int(index: number): number {
    const value = this.values[index];
    const n = typeof value === "string" || Buffer.isBuffer(value) ? Number(String(value)) : value;
    if (typeof n !== "number" || !Number.isSafeInteger(n)) this.unexpected(`integer at ${index}`);
    return n;
  }

  str(index: number): string {
    const value = this.values[index];
    if (Buffer.isBuffer(value)) return value.toString("utf8");
    if (typeof value !== "string") this.unexpected(`string at ${index}`);
    return value;
  }

  /** One of a script's named outcomes, sent as its index. */
  outcome<T extends string>(index: number, names: readonly T[]): T {
    const name = names[this.int(index)];
    if (name === undefined) this.unexpected(`outcome at ${index}`);
    return name;
  }

  /** The event a call published: seq at `index` (0 for none), its epoch next. */
  event(index: number): EventId | null {
    const seq = this.int(index);
    return seq === 0 ? null : { epoch: this.str(index + 1), seq };
  }

  unexpected(what: string): never {
    throw new UnexpectedReplyError(`${what} in the reply of ${this.script}`, this.values);
  }
}

type Command = (...args: Arg[]) => Promise<unknown>;

const loaded = new Map<string, ReadonlyMap<string, LuaScript>>();
let replacedIncludes: Readonly<Record<string, string>> = {};

/**
 * Includes replaced in the scripts of every Scripts made from now on: the seam through which
 * tests load a clock they can move. No package entry exports it, and the replacements live with
 * the tests.
 */
export function replaceIncludes(replaced: Readonly<Record<string, string>>): void {
  replacedIncludes = replaced;
}

/**
 * The one typed boundary between TypeScript and the scripts: defines them on a client under
 * names that carry their version, runs them, and turns failures into typed errors.
 */
export class Scripts {
  private readonly sources: ReadonlyMap<string, LuaScript>;

  constructor(
    private readonly client: Client,
    dir: URL = LUA_DIR,
  ) {
    const cacheKey = JSON.stringify([dir.href, replacedIncludes]);
    let sources = loaded.get(cacheKey);
    if (!sources) loaded.set(cacheKey, (sources = loadScripts(dir, replacedIncludes)));
    this.sources = sources;
    for (const source of sources.values()) {
      client.defineCommand(commandName(source), {
        lua: source.lua,
        numberOfKeys: source.numberOfKeys,
      });
    }
  }

  async run<Input, Output>(
    script: Script<Input, Output>,
    keys: readonly string[],
    shared: readonly Arg[],
    input: Input,
  ): Promise<Output> {
    const source = this.sources.get(script.name);
    if (!source) throw new Error(`rollcall: lua/${script.name}-N.lua is missing`);
    if (keys.length !== source.numberOfKeys) {
      throw new Error(
        `rollcall: ${script.name} takes ${source.numberOfKeys} keys, not ${keys.length}`,
      );
    }
    const args = [...keys, ...shared, ...script.args(input)];
    const reads = script.reads?.(input);
    let reply: unknown;
    let readReplies: unknown[] = [];
    try {
      if (reads) {
        [reply, ...readReplies] = await this.transaction(source, args, reads, script.binary);
      } else {
        reply = await this.call(source, args, script.binary);
      }
    } catch (error) {
      throw new RedisCallError(script.name, error);
    }
    // A bare integer is a one-field reply (a steady heartbeat's 0).
    if (typeof reply === "number") reply = [reply];
    if (!Array.isArray(reply)) throw new UnexpectedReplyError(`reply of ${script.name}`, reply);
    return script.decode(new Reply(script.name, reply, readReplies), input);
  }

  /**
   * One script call. Redis at maxmemory (noeviction) refuses a script before it runs; one with a
   * variant for the limit then runs that, which does only what does not grow memory.
   */
  private call(source: LuaScript, args: readonly Arg[], binary = false): Promise<unknown> {
    // Chained, not awaited: every call goes through here, and each async frame costs it a promise.
    return this.send(source, args, binary).catch((error: unknown) =>
      this.send(this.atLimit(source, error), args, binary),
    );
  }

  private send(source: LuaScript, args: readonly Arg[], binary: boolean): Promise<unknown> {
    const name = commandName(source) + (binary ? "Buffer" : "");
    return (this.client as unknown as Record<string, Command>)[name]!.call(this.client, ...args);
  }

  /** The script's variant for the limit, if Redis refused it at maxmemory; else `error`, thrown. */
  private atLimit(source: LuaScript, error: unknown): LuaScript {
    const variant = this.sources.get(`${source.name}AtLimit`);
    if (!variant || !refusedAtLimit(error)) throw error;
    return variant;
  }

  /**
   * The script then its reads in one MULTI. A script missing from Redis's cache (SCRIPT FLUSH)
   * fails inside the transaction, where the client cannot resend it: it is loaded, and the
   * transaction sent once more.
   */
  private async transaction(
    source: LuaScript,
    args: readonly Arg[],
    reads: readonly (readonly [string, ...Arg[]])[],
    binary = false,
  ): Promise<unknown[]> {
    try {
      return await this.multi(source, args, reads, binary);
    } catch (error) {
      // At maxmemory Redis refuses whatever a MULTI queues: the variant runs the reads itself.
      const variant = this.atLimit(source, error);
      const words = reads.flatMap((read) => [read.length, ...read]);
      const reply: unknown = await this.call(variant, [...args, ...words], binary);
      if (!Array.isArray(reply)) throw new UnexpectedReplyError(`reply of ${source.name}`, reply);
      const replies = reply as unknown[];
      const own = replies.length - reads.length;
      return [replies.slice(0, own), ...replies.slice(own)];
    }
  }

  private async multi(
    source: LuaScript,
    args: readonly Arg[],
    reads: readonly (readonly [string, ...Arg[]])[],
    binary = false,
  ): Promise<unknown[]> {
    const name = commandName(source) + (binary ? "Buffer" : "");
    for (let attempt = 0; ; attempt++) {
      // Commands queued on a MULTI return it, not a promise: exec() settles them all.
      const multi = this.client.multi() as unknown as Record<string, (...a: Arg[]) => unknown>;
      multi[name]!(...args);
      for (const [command, ...rest] of reads)
        multi[binary ? "callBuffer" : "call"]!(command, ...rest);
      const results = (await multi.exec!()) as [Error | null, unknown][] | null;
      if (!results) throw new Error("the transaction was aborted");
      const error = results.find(([e]) => e)?.[0];
      if (!error) return results.map(([, value]) => value);
      if (attempt > 0 || !error.message.includes("NOSCRIPT")) throw error;
      await this.client.script("LOAD", source.lua);
    }
  }
}

function commandName(source: LuaScript): string {
  return `rollcall_${source.name}_${source.sha.slice(0, 12)}`;
}
