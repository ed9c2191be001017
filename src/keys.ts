import { InvalidInputError } from "./errors.js";
import type { Settings } from "./options.js";

export type IdKind = "room" | "user" | "connection";

const MAX_ID_BYTES = 256;
// Control characters are refused so that the unit separator (\x1f) joining room and user in a
// member field, and the lexical range of a room, stay unambiguous.
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
  if (Buffer.byteLength(value) > MAX_ID_BYTES) {
    throw new InvalidInputError("INVALID_ID", `${kind} id must be at most ${MAX_ID_BYTES} bytes`);
  }
  return value;
}

/** FNV-1a over the UTF-8 bytes: stable across processes and versions, cheap, well spread. */
export function bucketOf(room: string, buckets: number): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(room)) {
    hash = Math.imul(hash ^ byte, 0x01000193);
  }
  return (hash >>> 0) % buckets;
}

/** The keys and channel prefix of one bucket: every key shares the bucket's hash tag. */
export interface BucketKeys {
  readonly bucket: number;
  /** KEYS of every script, in the order the scripts expect. */
  readonly keys: readonly [members: string, users: string, due: string, seq: string];
  readonly channelPrefix: string;
}

export function bucketKeys(prefix: string, bucket: number): BucketKeys {
  const tag = `{${prefix}:${bucket}}`;
  return {
    bucket,
    keys: [`${tag}:members`, `${tag}:users`, `${tag}:due`, `${tag}:seq`],
    channelPrefix: `${tag}:room:`,
  };
}

/** Every bucket of a deployment, and the bucket and channel of any room. */
export class Layout {
  readonly buckets: readonly BucketKeys[];

  constructor(settings: Settings) {
    this.buckets = Array.from({ length: settings.buckets }, (_, b) =>
      bucketKeys(settings.prefix, b),
    );
  }

  of(room: string): BucketKeys {
    return this.buckets[bucketOf(room, this.buckets.length)]!;
  }

  channel(room: string): string {
    return this.of(room).channelPrefix + room;
  }
}
