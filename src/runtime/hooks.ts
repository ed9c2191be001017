/**
 * Calling the functions users hand rollcall (authenticate, authorize, origins, identify, …) so
 * that nothing they do escapes as a crash: what a hook throws, or rejects with, comes back to
 * the caller as it is; a result of the wrong type or a hang comes back as a HookError. The
 * caller turns each into a refusal and reports it: a failing hook is the host application's
 * bug, never the client's, and never fatal.
 */
import { describe } from "../protocol/options.js";

/** A hook that answered with the wrong type, or not in time. */
export class HookError extends Error {
  constructor(
    /** The option the hook was given as: `authorize`, `origins`, … */
    readonly hook: string,
    readonly failure: "returned" | "timeout",
    message: string,
  ) {
    super(`the ${hook} hook ${message}`);
    this.name = "HookError";
  }
}

/** A type guard for a hook's result. */
export type Expect<T> = (value: unknown) => value is T;

export const isBoolean: Expect<boolean> = (value): value is boolean => typeof value === "boolean";

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

function checked<T>(hook: string, value: unknown, expect: Expect<T>, wanted: string): T {
  if (expect(value)) return value;
  throw new HookError(hook, "returned", `returned ${describe(value)}, not ${wanted}`);
}

/**
 * Calls a hook that must answer at once. A promise is a wrong answer here: it is refused, and
 * its rejection, if one comes, is swallowed (it would otherwise be unhandled).
 */
export function callNow<T>(hook: string, run: () => unknown, expect: Expect<T>, wanted: string): T {
  const value = run();
  if (isThenable(value)) {
    Promise.resolve(value).catch(() => undefined);
    throw new HookError(
      hook,
      "returned",
      `returned a promise, not ${wanted} (it must not be async)`,
    );
  }
  return checked(hook, value, expect, wanted);
}

/**
 * Calls a hook that may be async, within `timeoutMs`: past it the call fails with a timeout,
 * and the hook's answer no longer matters (a late rejection is swallowed).
 */
export async function callHook<T>(
  hook: string,
  run: () => unknown,
  expect: Expect<T>,
  wanted: string,
  timeoutMs: number,
): Promise<T> {
  // A synchronous throw becomes this promise's rejection.
  const answer = new Promise<unknown>((resolve) => resolve(run()));
  answer.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new HookError(hook, "timeout", `took longer than ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return checked(hook, await Promise.race([answer, late]), expect, wanted);
  } finally {
    clearTimeout(timer);
  }
}
