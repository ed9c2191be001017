import { InvalidInputError } from "./errors.js";

export type IdKind = "room" | "user" | "connection";

export const MAX_ID_BYTES = 256;
const utf8 = new TextEncoder();
// Control characters are refused: room ids end in channel names and keys, and a C0 character in
// one is a bug (or an attack) rather than a name.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Checks an id and returns it; ids are kept verbatim, so distinct ids stay distinct. */
export function checkId(kind: IdKind, value: unknown): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new InvalidInputError("INVALID_ID", `${kind} id must be a non-empty string`);
  }
  // A lone surrogate would be written as U+FFFD: two different ids could meet in Redis.
  if (!value.isWellFormed()) {
    throw new InvalidInputError("INVALID_ID", `${kind} id must be well-formed Unicode`);
  }
  if (CONTROL.test(value)) {
    throw new InvalidInputError("INVALID_ID", `${kind} id must not contain control characters`);
  }
  if (value.length > MAX_ID_BYTES / 3 && utf8.encode(value).length > MAX_ID_BYTES) {
    throw new InvalidInputError("INVALID_ID", `${kind} id must be at most ${MAX_ID_BYTES} bytes`);
  }
  return value;
}

/**
 * Orders ids as Redis orders their UTF-8 bytes, which is code point order. UTF-16 code units
 * agree with it except that surrogates (code points above U+FFFF) must sort after U+E000-U+FFFF.
 */
export function compareIds(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  return unit >= 0xe000 ? unit - 0x800 : unit;
}
