import { InvalidInputError } from "./errors.js";

export type IdKind = "room" | "user" | "connection";
/**
 * `verbatim`: any well-formed id, kept as it came (distinct ids stay distinct). `strict` also
 * refuses ids that render like others (see `strictIdProblem`).
 */
export type IdPolicy = "verbatim" | "strict";

export const MAX_ID_BYTES = 256;
const utf8 = new TextEncoder();
// Control characters are refused: room ids end in channel names and keys, and a C0 character in
// one is a bug (or an attack) rather than a name.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Checks an id and returns it; ids are kept verbatim, so distinct ids stay distinct. */
export function checkId(kind: IdKind, value: unknown, policy: IdPolicy = "verbatim"): string {
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
  const problem = policy === "strict" ? strictIdProblem(value) : undefined;
  if (problem !== undefined) {
    throw new InvalidInputError("INVALID_ID", `${kind} id ${problem} (strict ids)`);
  }
  return value;
}

// Characters that draw nothing, draw like another, or reorder what follows: control, format
// (bidi controls, zero-width ones, the soft hyphen), surrogates, private use, unassigned, line
// and paragraph separators, and every space but U+0020.
const INVISIBLE = /[\p{C}\p{Zl}\p{Zp}]|(?! )\p{Zs}/u;
// Scripts whose letters look like each other's; an id keeps to one. Han goes with the kana,
// Hangul or Bopomofo it is written with.
const SCRIPTS: readonly (readonly [string, RegExp])[] = [
  ["Latin", /\p{Script=Latin}/u],
  ["Greek", /\p{Script=Greek}/u],
  ["Cyrillic", /\p{Script=Cyrillic}/u],
  ["Armenian", /\p{Script=Armenian}/u],
  ["Cherokee", /\p{Script=Cherokee}/u],
  ["Georgian", /\p{Script=Georgian}/u],
  ["Hebrew", /\p{Script=Hebrew}/u],
  ["Arabic", /\p{Script=Arabic}/u],
  [
    "CJK",
    /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Bopomofo}]/u,
  ],
];
const LETTER = /\p{L}/u;

/**
 * Why an id fails the strict policy, or undefined: it must be in NFKC form (no decomposed accents,
 * fullwidth letters or ligatures that look like plain ones), hold no invisible character, and not
 * mix the letters of two scripts (`аnn` with a Cyrillic а). Ids of one script that look like
 * another's (all-Cyrillic `аео`) still pass: ids meant to be told apart by people should be
 * checked where they are issued.
 */
export function strictIdProblem(id: string): string | undefined {
  if (id.normalize("NFKC") !== id) return "is not in Unicode normal form NFKC";
  if (INVISIBLE.test(id)) return "holds an invisible or format character";
  let seen: string | undefined;
  for (const char of id) {
    if (!LETTER.test(char)) continue;
    const script = SCRIPTS.find(([, pattern]) => pattern.test(char))?.[0] ?? "other";
    if (seen !== undefined && script !== seen) return "mixes letters of two scripts";
    seen = script;
  }
  return undefined;
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
