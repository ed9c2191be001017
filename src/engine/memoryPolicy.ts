import type { Cluster, Redis } from "ioredis";
import { RedisCallError } from "./errors.js";
import type { Client } from "./script.js";

/** One master's maxmemory-policy, or null with why it could not be read. */
export interface MemoryPolicy {
  /** host:port of the master. */
  readonly node: string;
  readonly policy: string | null;
  /** Why the policy could not be read (CONFIG and INFO both refused, an outage). */
  readonly unreadable?: string;
}

/** The one policy under which Redis never drops a key rollcall still needs. */
export const SAFE_POLICY = "noeviction";

/** What the deployment's Redis is, as an operator should hear about it. */
export type WarningCode = "EVICTING_POLICY" | "UNKNOWN_POLICY";

/**
 * Something about the deployment's Redis that rollcall runs on, but not safely: a Rollcall's
 * `warning` event (process.emitWarning when it has no listener). Not an error: nothing failed.
 */
export class RollcallWarning extends Error {
  constructor(
    readonly code: WarningCode,
    message: string,
    /** The masters it is about. */
    readonly policies: readonly MemoryPolicy[],
  ) {
    super(message);
    this.name = "RollcallWarning";
  }
}

/** The masters that hold the data: every master of a Cluster, or the one Redis. */
export function masters(client: Client): Redis[] {
  return client.isCluster ? (client as Cluster).nodes("master") : [client as Redis];
}

/**
 * Every master's maxmemory-policy: CONFIG GET, or INFO memory where CONFIG is renamed or
 * refused (managed Redis services disable it). Never rejects: a master whose policy cannot be
 * read says why.
 */
export function memoryPolicies(client: Client): Promise<MemoryPolicy[]> {
  return Promise.all(masters(client).map(policyOf));
}

async function policyOf(node: Redis): Promise<MemoryPolicy> {
  const name = `${node.options.host ?? "localhost"}:${node.options.port ?? 6379}`;
  let refused: string;
  try {
    const reply = await node.call("CONFIG", "GET", "maxmemory-policy");
    const policy: unknown = Array.isArray(reply) ? reply[1] : undefined;
    if (typeof policy === "string") return { node: name, policy };
    refused = `CONFIG GET answered ${JSON.stringify(reply)}`;
  } catch (error) {
    const why = new RedisCallError("CONFIG GET maxmemory-policy", error);
    if (why.code === "REDIS_UNAVAILABLE")
      return { node: name, policy: null, unreadable: why.message };
    refused = why.message;
  }
  try {
    const info = await node.info("memory");
    const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
    if (policy) return { node: name, policy };
    return { node: name, policy: null, unreadable: `${refused}; INFO memory names no policy` };
  } catch (error) {
    const why = new RedisCallError("INFO memory", error).message;
    return { node: name, policy: null, unreadable: `${refused}; ${why}` };
  }
}

/** What an operator must hear about these policies, or null when every master is safe. */
export function policyWarning(policies: readonly MemoryPolicy[]): RollcallWarning | null {
  const evicting = policies.filter((p) => p.policy !== null && p.policy !== SAFE_POLICY);
  if (evicting.length > 0) {
    const where = evicting.map((p) => `${p.policy} on ${p.node}`).join(", ");
    return new RollcallWarning(
      "EVICTING_POLICY",
      `Redis evicts keys when it reaches maxmemory (maxmemory-policy ${where}). rollcall's rooms ` +
        `and indexes all carry an expiry, so any evicting policy, volatile-* included, can drop ` +
        `present members without a leave, restart rooms' events and leave counts wrong. Set ` +
        `maxmemory-policy ${SAFE_POLICY} (then a full Redis refuses writes with REDIS_OOM ` +
        `instead of losing presence).`,
      evicting,
    );
  }
  const unknown = policies.filter((p) => p.policy === null);
  if (unknown.length === 0) return null;
  return new RollcallWarning(
    "UNKNOWN_POLICY",
    `could not read maxmemory-policy (${unknown.map((p) => `${p.node}: ${p.unreadable}`).join("; ")}); ` +
      `rollcall needs ${SAFE_POLICY}: check it by other means.`,
    unknown,
  );
}
