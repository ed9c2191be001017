/** Stable codes: match on `error.code`, never on the message. */
export type ErrorCode =
  "INVALID_ID" | "INVALID_OPTION" | "INVALID_STATE" | "UNEXPECTED_REPLY" | "REDIS_ERROR";

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

/** Redis refused or could not run a call (outage, timeout, script error); `cause` is the original. */
export class RedisCallError extends RollcallError {
  constructor(operation: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super("REDIS_ERROR", `rollcall ${operation} failed: ${reason}`, { cause });
  }
}

/** A reply or a published message that does not have the shape rollcall's scripts produce. */
export class UnexpectedReplyError extends RollcallError {
  constructor(what: string, value: unknown) {
    super("UNEXPECTED_REPLY", `Unexpected ${what}: ${JSON.stringify(value)?.slice(0, 200)}`);
  }
}
