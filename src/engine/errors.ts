import { RollcallError } from "../protocol/errors.js";

// What Redis or the client says when Redis cannot serve now but may soon: connection trouble,
// a cluster that is resharding, failing over or down, a server loading its data or stuck in a
// long script. Anything else a call fails with is a script bug or another refusal.
const UNAVAILABLE = new RegExp(
  [
    /^(?:CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|BUSY|NOREPLICAS|MOVED|ASK)\b/,
    /^Too many Cluster redirections/,
    /^Connection is closed|^Reached the max retries|^Command timed out|^Stream isn't writeable/,
    /^Failed to refresh slots cache|^None of startup nodes is available|^Cluster isn't ready/,
    /\b(?:ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENOTFOUND)\b/,
    /Script attempted to (?:access a non local key|execute a (?:write )?command while the cluster is down)/,
  ]
    .map((r) => r.source)
    .join("|"),
);
// Redis is at maxmemory under noeviction and refused a call that would grow memory: waiting
// for leaves and sweeps to free some (or raising the limit) is the remedy, not a retry now.
const OUT_OF_MEMORY = /^OOM\b/;

/** Redis refused a call at maxmemory, before running it (in a MULTI: a command queued in it). */
export function refusedAtLimit(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const queued = (error as { previousErrors?: unknown }).previousErrors;
  const refused = (e: unknown) => e instanceof Error && OUT_OF_MEMORY.test(e.message);
  return refused(error) || (Array.isArray(queued) && queued.some(refused));
}
// A Lua runtime or compile error, in Redis 7's words ("ERR user_script:12: ...").
const SCRIPT_BUG = /user_script:\d+:|Error (?:running|compiling) script/;

/** A call Redis did not carry out: `code` says whether to wait (unavailable) or fix something. */
export class RedisCallError extends RollcallError {
  constructor(operation: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    const code = UNAVAILABLE.test(reason)
      ? "REDIS_UNAVAILABLE"
      : refusedAtLimit(cause)
        ? "REDIS_OOM"
        : SCRIPT_BUG.test(reason)
          ? "SCRIPT_ERROR"
          : "REDIS_ERROR";
    super(code, `rollcall ${operation} failed: ${reason}`, { cause });
  }
}
