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

/** Where a value sits in a state, for messages: `status`, `devices[2].name`. */
function at(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  const name = /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key);
  return path === "" ? name : /^[A-Za-z_$]/.test(name) ? `${path}.${name}` : `${path}[${name}]`;
}

/** What a value JSON cannot carry is, in words: `undefined`, `a function`, `a Date`. */
function kind(value: unknown): string {
  if (value === undefined) return "undefined";
  const type =
    typeof value === "object" ? ((value as object).constructor?.name ?? "object") : typeof value;
  return `${/^[aeiou]/i.test(type) ? "an" : "a"} ${type}`;
}

// JSON with sorted keys, so that equal states are equal strings and a heartbeat that repeats the
// state publishes nothing. `path` names the value in messages.
function canonical(value: unknown, depth: number, path: string): string {
  if (depth > MAX_DEPTH) invalid(`nests deeper than ${MAX_DEPTH} levels, at ${path}`);
  if (value === null || typeof value === "boolean" || typeof value === "string") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) invalid(`field ${path} is ${value}, which JSON cannot carry`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    const items: string[] = [];
    // A plain loop: map() would skip the holes of a sparse array and write `[1,,3]`.
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) invalid(`field ${path} is a sparse array (${at(path, i)} is a hole)`);
      items.push(canonical(value[i], depth + 1, at(path, i)));
    }
    return `[${items.join(",")}]`;
  }
  if (typeof value === "object" && isPlainObject(value)) {
    const entries = Object.keys(value)
      .sort()
      .map(
        (k) =>
          `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k], depth + 1, at(path, k))}`,
      );
    return `{${entries.join(",")}}`;
  }
  return invalid(`field ${path} is ${kind(value)}, which JSON cannot carry`);
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
    let rough: string | undefined;
    try {
      rough = JSON.stringify(state);
    } catch {
      // a BigInt, a getter that throws: canonical() below says which field, or why
    }
    if (rough !== undefined && rough.length > maxBytes) {
      invalid(`is at least ${rough.length} bytes of JSON, more than the ${maxBytes} allowed`);
    }
    json = canonical(state, 0, "");
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
