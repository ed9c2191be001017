import { InvalidInputError } from "./errors.js";

export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
/** What a member shows about itself: status, device, … A small JSON object. */
export type MemberState = { [key: string]: JsonValue };

const MAX_DEPTH = 8;
const utf8 = new TextEncoder();

function invalid(message: string): never {
  throw new InvalidInputError("INVALID_STATE", `member state ${message}`);
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

// JSON with sorted keys, so that equal states are equal strings and a heartbeat that repeats the
// state publishes nothing.
function canonical(value: unknown, depth: number): string {
  if (depth > MAX_DEPTH) invalid(`nests deeper than ${MAX_DEPTH} levels`);
  if (value === null || typeof value === "boolean" || typeof value === "string") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) invalid(`holds a non-finite number`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    const items: string[] = [];
    // A plain loop: map() would skip the holes of a sparse array and write `[1,,3]`.
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) invalid("holds a sparse array");
      items.push(canonical(value[i], depth + 1));
    }
    return `[${items.join(",")}]`;
  }
  if (typeof value === "object" && isPlainObject(value)) {
    const entries = Object.keys(value)
      .sort()
      .map(
        (k) =>
          `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k], depth + 1)}`,
      );
    return `{${entries.join(",")}}`;
  }
  return invalid(`holds a ${typeof value}, which JSON cannot carry`);
}

/** Checks a member state and returns its canonical JSON, at most `maxBytes` long. */
export function encodeState(state: unknown, maxBytes: number): string {
  let json: string;
  try {
    if (
      typeof state !== "object" ||
      state === null ||
      Array.isArray(state) ||
      !isPlainObject(state)
    ) {
      invalid("must be a plain JSON object");
    }
    // The bound first, at native speed: canonical JSON is as long as JSON.stringify's (only the
    // key order differs), and no shorter in bytes than in characters.
    const rough = JSON.stringify(state) as string | undefined;
    if (rough !== undefined && rough.length > maxBytes) {
      invalid(`is at least ${rough.length} bytes of JSON, more than the ${maxBytes} allowed`);
    }
    json = canonical(state, 0);
  } catch (error) {
    // A getter or a proxy trap that throws: bad input like any other, never a raw error.
    if (error instanceof InvalidInputError) throw error;
    invalid(`cannot be read: ${String(error)}`);
  }
  const bytes = utf8.encode(json).length;
  if (bytes > maxBytes) invalid(`is ${bytes} bytes of JSON, more than the ${maxBytes} allowed`);
  return json;
}

/** A state as stored and published (canonical JSON), back to an object. */
export function parseState(json: string): MemberState {
  const value: unknown = JSON.parse(json);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new SyntaxError("not a JSON object");
  }
  return value as MemberState;
}
