import { UnexpectedReplyError } from "../../protocol/errors.js";
import { compareIds } from "../../protocol/ids.js";
import { parseState, type MemberState } from "../../protocol/state.js";
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
  /** All members of the room; `members` lists at most `rosterLimit` of them. */
  count: number;
  /** In the byte order of their ids. */
  members: RosterMember[];
  /** Users typing, in member order. */
  typing: string[];
  /** With the log on: the bucket log's last entry id then; the room's later events follow it. */
  log?: string;
  /** Redis's time when the snapshot was read, ms: what its members' times are ages against. */
  at: number;
}

/** Fields before the members, and per member. */
const HEADER = 5;
const FIELDS = 7;

function state(reply: Reply, index: number): MemberState | null {
  const json = reply.str(index);
  if (json === "") return null;
  try {
    return parseState(json);
  } catch {
    throw new UnexpectedReplyError("member state in a roster", json);
  }
}

export const roster: Script<{ room: string; limit: number }, Roster> = {
  name: "roster",
  args: ({ limit }) => [limit],
  decode: (reply, { room }) => {
    const members: RosterMember[] = [];
    for (let i = HEADER; i < reply.length; i += FIELDS) {
      const typedAt = reply.int(i + 4);
      const leavingAt = reply.int(i + 5);
      members.push({
        user: reply.str(i),
        connections: reply.int(i + 1),
        lastSeen: reply.int(i + 2),
        joinedAt: reply.int(i + 3),
        typedAt: typedAt === 0 ? null : typedAt,
        leavingAt: leavingAt === 0 ? null : leavingAt,
        state: state(reply, i + 6),
      });
    }
    members.sort((a, b) => compareIds(a.user, b.user));
    const log = reply.str(3);
    return {
      room,
      ...(log === "" ? {} : { log }),
      epoch: reply.str(0),
      seq: reply.int(1),
      count: reply.int(2),
      members,
      at: reply.int(4),
      typing: members.filter((m) => m.typedAt !== null).map((m) => m.user),
    };
  },
};
