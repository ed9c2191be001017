import { UnexpectedReplyError } from "../../protocol/errors.js";
import { compareIds } from "../../protocol/ids.js";
import { parseState, type MemberState } from "../../protocol/state.js";
import { decodeRecord } from "../record.js";
import type { Reply, Script } from "../script.js";

export interface RosterMember {
  user: string;
  /** Connections heartbeating the user into the room. */
  connections: number;
  /** Redis time of the user's latest heartbeat, ms. */
  lastSeen: number;
  /** Redis time at which the user joined, ms. */
  joinedAt: number;
  /** Redis time of the user's latest startTyping, ms, or null when not typing (the typing-start
   * event's `at` is when typing began; the mark stops typingWindowMs after this). */
  typedAt: number | null;
  /** With no live connection left: when the user's leave will be published, unless one comes
   * back before (the leave grace); null otherwise. */
  leavingAt: number | null;
  state: MemberState | null;
}

export interface Roster {
  room: string;
  /** The sequence space of `seq`: events of another epoch call for a new snapshot. */
  epoch: string;
  /** Apply events of this epoch whose `prev` is this number, then the later ones in order. */
  seq: number;
  /** All members of the room; `members` lists those of this page. */
  count: number;
  /** In the byte order of their ids. */
  members: RosterMember[];
  /** Users typing, in member order. */
  typing: string[];
  /** With the log on: the bucket log's last entry id then; the room's later events follow it. */
  log?: string;
  /** Redis's time when the page was read, ms: what its members' times are ages against. */
  at: number;
  /**
   * Where the next page starts (pass it to roster() as `cursor`), or null after the last. A
   * room of at most `rosterLimit` members comes whole, in one page. Each page is consistent
   * with its own `seq`.
   */
  cursor: string | null;
}

/** Fields before the page's members. */
const HEADER = 6;

function text(value: unknown, reply: Reply, what: string): string {
  if (!Buffer.isBuffer(value)) reply.unexpected(what);
  return value.toString("utf8");
}

function member(user: string, raw: Buffer, leaveGraceMs: number): RosterMember {
  const record = decodeRecord(raw);
  let state: MemberState | null = null;
  if (record.state !== "") {
    try {
      state = parseState(record.state);
    } catch {
      throw new UnexpectedReplyError("member state in a roster", record.state);
    }
  }
  return {
    user,
    connections: record.beats.length,
    lastSeen:
      record.graceEnd !== null ? record.graceEnd - leaveGraceMs : Math.max(0, ...record.beats),
    joinedAt: record.joinedAt,
    typedAt: record.typedAt,
    leavingAt: record.graceEnd,
    state,
  };
}

interface RosterInput {
  room: string;
  limit: number;
  cursor: string;
  leaveGraceMs: number;
}

/** Records come as stored (binary): this decodes them, not the script. */
export const roster: Script<RosterInput, Roster> = {
  name: "roster",
  binary: true,
  args: ({ limit, cursor }) => [limit, cursor],
  decode: (reply, { room, leaveGraceMs }) => {
    const value: unknown = reply.values[HEADER];
    if (!Array.isArray(value)) return reply.unexpected(`records at ${HEADER}`);
    const fields = value as unknown[];
    const members: RosterMember[] = [];
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const user = text(fields[i], reply, `user at ${i}`);
      if (user === "") continue; // the room's meta
      const raw: unknown = fields[i + 1];
      if (!Buffer.isBuffer(raw)) return reply.unexpected(`record of ${user}`);
      try {
        members.push(member(user, raw, leaveGraceMs));
      } catch (error) {
        if (error instanceof UnexpectedReplyError) throw error;
        throw new UnexpectedReplyError(`record of ${user} in a roster`, raw.toString("hex"));
      }
    }
    members.sort((a, b) => compareIds(a.user, b.user));
    const log = reply.str(3);
    const cursor = reply.str(5);
    return {
      room,
      ...(log === "" ? {} : { log }),
      epoch: reply.str(0),
      seq: reply.int(1),
      count: reply.int(2),
      members,
      at: reply.int(4),
      cursor: cursor === "" ? null : cursor,
      typing: members.filter((m) => m.typedAt !== null).map((m) => m.user),
    };
  },
};
