/** Stable codes: match on `error.code`, never on the message. */
export type ErrorCode =
  | "INVALID_ID"
  | "INVALID_STATE"
  | "INVALID_OPTION"
  | "UNEXPECTED_REPLY"
  | "SETTINGS_MISMATCH"
  | "REDIS_UNAVAILABLE"
  | "REDIS_OOM"
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
