/** Stable codes: match on `error.code`, never on the message. */
export type ErrorCode =
  | "INVALID_ID"
  | "INVALID_STATE"
  | "INVALID_OPTION"
  | "UNEXPECTED_REPLY"
  | "SETTINGS_MISMATCH"
  | "REDIS_UNAVAILABLE"
  | "SCRIPT_ERROR"
  | "REDIS_ERROR";

export class RollcallError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Bad input, rejected before anything reaches Redis. */
export class InvalidInputError extends RollcallError {}

/** A reply or a published message that does not have the shape rollcall produces. */
export class UnexpectedReplyError extends RollcallError {
  constructor(what: string, value: unknown) {
    super("UNEXPECTED_REPLY", `Unexpected ${what}: ${JSON.stringify(value)?.slice(0, 200)}`);
  }
}

/** This instance's settings differ from those the deployment stored in Redis. */
export class SettingsMismatchError extends RollcallError {
  constructor(readonly differences: readonly string[]) {
    super(
      "SETTINGS_MISMATCH",
      `rollcall settings differ from the deployment's in Redis: ${differences.join("; ")}`,
    );
  }
}

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
// A Lua runtime or compile error, in Redis 7's words ("ERR user_script:12: ...").
const SCRIPT_BUG = /user_script:\d+:|Error (?:running|compiling) script/;

/** A call Redis did not carry out: `code` says whether to wait (unavailable) or fix something. */
export class RedisCallError extends RollcallError {
  constructor(operation: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    const code = UNAVAILABLE.test(reason)
      ? "REDIS_UNAVAILABLE"
      : SCRIPT_BUG.test(reason)
        ? "SCRIPT_ERROR"
        : "REDIS_ERROR";
    super(code, `rollcall ${operation} failed: ${reason}`, { cause });
  }
}
