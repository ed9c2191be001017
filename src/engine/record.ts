/**
 * The member record, as roster() reads it: the same packed format lua/include/record.lua
 * defines and every script writes (the offsets are named there; this is its one reader outside
 * Redis, and the model test holds the two to agreeing on every record it sees).
 *
 *   joinedAt TIME | flags (connections n in bits 0-6, typing in bit 7) | typedAt TIME if typing
 *   | n × (id length, id, TIME of its last heartbeat) | if n is 0: leave grace end TIME, reason
 *   | state JSON (the rest)
 *
 * TIME is 6 bytes, big-endian milliseconds.
 */
export interface DecodedRecord {
  joinedAt: number;
  typedAt: number | null;
  /** Live connections. */
  connections: number;
  /** The latest of their heartbeats, ms (0 with none). */
  lastBeat: number;
  /** With no connection left: when the member's leave grace ends. */
  graceEnd: number | null;
  /** State JSON, or "" for none. */
  state: string;
}

const TIME_BYTES = 6;
const FLAGS_AT = TIME_BYTES;
const TYPING = 128;
const GRACE_BYTES = TIME_BYTES + 1;

/** Reads a record without an array or a copy per connection: a roster decodes thousands. */
export function decodeRecord(raw: Buffer): DecodedRecord {
  const flags = raw[FLAGS_AT]!;
  let at = FLAGS_AT + 1;
  let typedAt: number | null = null;
  if (flags >= TYPING) {
    typedAt = raw.readUIntBE(at, TIME_BYTES);
    at += TIME_BYTES;
  }
  const connections = flags & ~TYPING;
  let lastBeat = 0;
  for (let i = 0; i < connections; i++) {
    const length = raw[at]!;
    const beat = raw.readUIntBE(at + 1 + length, TIME_BYTES);
    if (beat > lastBeat) lastBeat = beat;
    at += 1 + length + TIME_BYTES;
  }
  let graceEnd: number | null = null;
  if (connections === 0) {
    graceEnd = raw.readUIntBE(at, TIME_BYTES);
    at += GRACE_BYTES;
  }
  if (at > raw.length) throw new RangeError("a record shorter than its header says");
  return {
    joinedAt: raw.readUIntBE(0, TIME_BYTES),
    typedAt,
    connections,
    lastBeat,
    graceEnd,
    state: at === raw.length ? "" : raw.toString("utf8", at),
  };
}
