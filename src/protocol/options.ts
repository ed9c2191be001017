import { InvalidInputError } from "./errors.js";

export function invalidOption(message: string): never {
  throw new InvalidInputError("INVALID_OPTION", message);
}

/** Any value, in words for an error message: never throws (bigints, null-prototype objects). */
export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  try {
    return String(value);
  } catch {
    return `a value of type ${typeof value}`;
  }
}

/** An integer option within bounds, or a typed INVALID_OPTION error. */
export function integer(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    invalidOption(`${name} must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

/**
 * Refuses anything but an object of the given option names (a typo must not pass silently), and
 * returns it. `undefined` and `null` stand for no options.
 */
export function knownKeys<T extends object>(
  options: T | undefined | null,
  names: readonly string[],
): T {
  if (options === undefined || options === null) return {} as T;
  if (typeof options !== "object" || Array.isArray(options)) {
    invalidOption("options must be an object");
  }
  for (const key of Object.keys(options)) {
    if (!names.includes(key)) invalidOption(`unknown option ${key}`);
  }
  return options;
}

/** A function option, or a typed INVALID_OPTION error. */
export function callback<F>(name: string, value: unknown): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "function") invalidOption(`${name} must be a function`);
  return value as F;
}
