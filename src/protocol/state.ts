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

/**
 * A lower bound of a value's JSON length in characters (so in bytes), counted only until it
 * passes `limit`: a state of a million keys costs no more to refuse than one just too big.
 */
function leastJsonLength(value: unknown, limit: number): number {
  let length = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && length <= limit) {
    const next = pending.pop();
    if (typeof next === "string") length += next.length + 2;
    else if (typeof next !== "object" || next === null) length += 1;
    else if (Array.isArray(next)) {
      // Brackets, and at least a character and a comma an item.
      length += 2 * next.length + 1;
      for (let i = 0; i < next.length && length <= limit; i++) pending.push(next[i]);
    } else {
      length += 2;
      for (const key in next) {
        if (length > limit) break;
        // Quotes, colon, comma.
        length += key.length + 4;
        pending.push((next as Record<string, unknown>)[key]);
      }
    }
  }
  return length;
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
    // The bound first, before any work proportional to the state's size.
    const least = leastJsonLength(state, maxBytes);
    if (least > maxBytes) {
      invalid(`is more than ${maxBytes} bytes of JSON, the most allowed (at least ${least})`);
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
