import { UnexpectedReplyError } from "../../protocol/errors.js";
import { compareIds } from "../../protocol/ids.js";
import { parseState, type MemberState } from "../../protocol/state.js";
import { RedisCallError } from "../errors.js";
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
    connections: record.connections,
    lastSeen: record.graceEnd !== null ? record.graceEnd - leaveGraceMs : record.lastBeat,
    joinedAt: record.joinedAt,
    typedAt: record.typedAt,
    leavingAt: record.graceEnd,
    state,
  };
}

/** How a page's records are read: the room's own hash whole or by HSCAN, or some of its shards
 * (lua/include/shards.lua), each whole. */
export type RosterRead =
  | { kind: "whole" }
  | { kind: "scan"; cursor: string }
  | { kind: "shards"; keys: readonly string[]; next: number; of: number };

interface RosterInput {
  room: string;
  /** The room's own hash: its meta (field ''), and its records unless it is sharded. */
  key: string;
  limit: number;
  /** '' for the first page, or what the previous one returned (see ROSTER_CURSOR). */
  cursor: string;
  read: RosterRead;
  leaveGraceMs: number;
}

/** A room found stored otherwise than the read assumed: read it again as it is. */
export interface Reshaped {
  reshaped: true;
  count: number;
  shards: number;
}

/** What roster() accepts as a cursor: '', '>' and an id (by id), HSCAN's digits, or
 * 's<next shard>:<shards>'. */
export const ROSTER_CURSOR = /^(?:>.+|\d{1,20}|s\d{1,3}:\d{1,3})?$/s;

/**
 * A page of the room's members. The script (lua/roster-3.lua) reads what the page is consistent
 * with; the records follow it in the same MULTI, read natively and decoded here. A room in its
 * own hash is read whole (HGETALL when it is known to be small; HSCAN returns a small room whole
 * too) and yields at most `limit` members by id, then the next by id after a '>' cursor; or in
 * HSCAN's pages of about `limit`. A sharded room yields a few shards a page. Either way a member
 * present throughout is listed on some page; one may be listed twice (HSCAN returns again what a
 * rehash moved, and a read starts over from the first record when the room moved into shards,
 * out of them, or into a hash table since the page before): readPages lists it once.
 */
export const roster: Script<RosterInput, Roster | Reshaped> = {
  name: "roster",
  binary: true,
  args: () => [],
  reads: ({ key, limit, read }) =>
    read.kind === "whole"
      ? [["HGETALL", key]]
      : read.kind === "scan"
        ? [["HSCAN", key, read.cursor, "COUNT", limit + 1]]
        : read.keys.map((shard) => ["HGETALL", shard] as const),
  decode: (reply, { room, limit, cursor, read, leaveGraceMs }) => {
    const count = reply.int(2);
    const shards = reply.int(5);
    if ((read.kind === "shards" ? read.of : 0) !== shards) return { reshaped: true, count, shards };
    let records: unknown[] = reply.reads as unknown[];
    let next = "0";
    if (read.kind === "scan") {
      const scan: unknown = reply.reads[0];
      if (!Array.isArray(scan) || scan.length !== 2) return reply.unexpected("HSCAN's reply");
      next = text(scan[0], reply, "HSCAN's cursor");
      records = [scan[1]];
    }
    const complete = next === "0" && read.kind !== "shards";
    // A page after the first by id lists the ids after the last one listed, when the room is
    // read whole; when HSCAN reads it in parts, they are its pages from the start.
    const after = complete && cursor.startsWith(">") ? cursor.slice(1) : null;
    let members: RosterMember[] = [];
    // Ids of ASCII alone sort by the engine's own comparison, byte order already.
    let ascii = true;
    for (const fields of records) {
      if (!Array.isArray(fields)) return reply.unexpected("the room's records");
      for (let i = 0; i + 1 < fields.length; i += 2) {
        const user = text(fields[i], reply, `user at ${i}`);
        ascii &&= user.length === (fields[i] as Buffer).length;
        if (user === "") continue; // the room's meta
        if (after !== null && compareIds(user, after) <= 0) continue;
        const raw: unknown = fields[i + 1];
        if (!Buffer.isBuffer(raw)) return reply.unexpected(`record of ${user}`);
        try {
          members.push(member(user, raw, leaveGraceMs));
        } catch (error) {
          if (error instanceof UnexpectedReplyError) throw error;
          throw new UnexpectedReplyError(`record of ${user} in a roster`, raw.toString("hex"));
        }
      }
    }
    members.sort(
      ascii ? (a, b) => (a.user < b.user ? -1 : 1) : (a, b) => compareIds(a.user, b.user),
    );
    let page: string | null = next === "0" ? null : next;
    if (read.kind === "shards" && read.next < shards) page = `s${read.next}:${shards}`;
    if (complete && members.length > limit) {
      members = members.slice(0, limit);
      page = `>${members.at(-1)!.user}`;
    }
    const log = reply.str(3);
    const roster: Roster = {
      room,
      ...(log === "" ? {} : { log }),
      epoch: reply.str(0),
      seq: reply.int(1),
      count,
      members,
      at: reply.int(4),
      cursor: page,
      typing: typistsOf(members),
    };
    // It went on from its cursor over records no earlier page of the read listed: the ids after
    // the cursor's, or the shards after those read (a member's shard is its id's).
    const from = read.kind === "shards" ? read.next - read.keys.length : -1;
    if (after !== null || cursor === `s${from}:${shards}`) goesOn.add(roster);
    return roster;
  },
};

/** The pages that went on from their cursor, listing none of the earlier pages' members. */
const goesOn = new WeakSet<Roster>();

/** The typists among members, in their order. */
function typistsOf(members: readonly RosterMember[]): string[] {
  return members.filter((m) => m.typedAt !== null).map((m) => m.user);
}

/** Reads of a room's pages before readPages gives up on pages that do not add up. */
const PAGE_READS = 3;

/**
 * Every page of a room's roster (`page` reads the one at a cursor, '' the first), as
 * Rollcall.rosterPages returns them: no member on two pages (a repeat is kept on the last page
 * that listed it, as it was then), all of one epoch, and, when they share one seq (nothing
 * happened in the room between them), exactly `count` members. The room is read again from its
 * first page when its pages span two epochs (Redis failed over between them: an HSCAN cursor
 * means nothing on another server, so members may be missing) or list other than `count`
 * members at one seq; after PAGE_READS such reads, a RedisCallError says why. Pages of several
 * seqs are each consistent with its own seq only: the room's events between them make them one
 * roster (Replica.installPages, assemble).
 */
export async function readPages(page: (cursor: string) => Promise<Roster>): Promise<Roster[]> {
  let problem = "";
  for (let read = 0; read < PAGE_READS; read++) {
    const pages = [await page("")];
    for (let last = pages[0]!; last.cursor !== null && last.epoch === pages[0]!.epoch;) {
      pages.push((last = await page(last.cursor)));
    }
    const distinct = distinctMembers(pages);
    problem = disagreement(distinct);
    if (problem === "") return distinct;
  }
  throw new RedisCallError("roster pages", new Error(`${PAGE_READS} reads, each ${problem}`));
}

/** The pages with each member on the last page that lists it only (with its typing). */
function distinctMembers(pages: readonly Roster[]): Roster[] {
  const listed = new Set<string>();
  const distinct = [...pages];
  // A read that never started over nor met a rehash lists each member once: nothing to look for.
  if (pages.slice(1).every((page) => goesOn.has(page))) return distinct;
  for (let p = pages.length - 1; p >= 0; p--) {
    const page = pages[p]!;
    let members: RosterMember[] | null = null;
    for (let i = 0; i < page.members.length; i++) {
      const member = page.members[i]!;
      const size = listed.size;
      if (listed.add(member.user).size > size) members?.push(member);
      else members ??= page.members.slice(0, i);
    }
    if (members) distinct[p] = { ...page, members, typing: typistsOf(members) };
  }
  return distinct;
}

/** Why pages are not the room's roster, or '' when they are (see readPages). */
function disagreement(pages: readonly Roster[]): string {
  const first = pages[0]!;
  const last = pages.at(-1)!;
  if (last.epoch !== first.epoch) {
    return `spanned epochs ${first.epoch} and ${last.epoch} (a failover between pages)`;
  }
  if (pages.length === 1 || pages.some((p) => p.seq !== first.seq)) return "";
  const listed = pages.reduce((sum, p) => sum + p.members.length, 0);
  if (listed === last.count) return "";
  return `listed ${listed} members at seq ${first.seq}, where the room counts ${last.count}`;
}
