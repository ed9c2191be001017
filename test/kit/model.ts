import { bucketOf } from "../../src/engine/layout.js";
import { compareIds } from "../../src/protocol/ids.js";
import type { EventType } from "../../src/protocol/events.js";

/**
 * A small pure model of presence: what the engine's scripts should do, call by call, on a clock
 * that moves only when told. The model-based test runs the same calls against Redis and compares
 * results, events and rosters at every step.
 *
 * Rooms keep their members in the order a small Redis hash does (insertion order; an update keeps
 * a field's place), so the model knows the order in which a sweep meets them.
 */
export interface ModelSettings {
  presenceWindowMs: number;
  typingWindowMs: number;
  leaveGraceMs: number;
  buckets: number;
}

interface Member {
  joinedAt: number;
  /** In the record's order: a new connection goes last, a removed one closes the gap. */
  conns: { id: string; beat: number }[];
  typedAt: number | null;
  graceEnd: number | null;
  graceReason: "explicit" | "expired" | null;
  /** Canonical JSON, or "" for none. */
  state: string;
}

interface Room {
  members: Map<string, Member>;
  /** Seq of the room's last event, 0 before the first. */
  lastSeq: number;
}

/** An event as the log holds it, without its epoch. */
export interface ModelEvent {
  type: EventType;
  room: string;
  user: string;
  at: number;
  seq: number;
  prev: number;
  reason?: string;
  state?: unknown;
  roster?: string[];
  count?: number;
}

export interface ModelMember {
  user: string;
  connections: number;
  lastSeen: number;
  joinedAt: number;
  typedAt: number | null;
  leavingAt: number | null;
  state: unknown;
}

export interface ModelCounts {
  users: number;
  connections: number;
  typing: number;
}

export interface ModelRoster {
  seq: number;
  count: number;
  members: ModelMember[];
  typing: string[];
}

/** A call's outcome, named as the engine's scripts name it, and the seq of what it published. */
export interface ModelResult {
  outcome: string;
  seq: number;
}

export interface SweepResult {
  connections: number;
  leaves: number;
  typingStops: number;
}

const MAX_CONNECTIONS = 64;

export class PresenceModel {
  now: number;
  /** Events published since the last take(), in order. */
  private events: ModelEvent[] = [];
  private readonly rooms = new Map<string, Room>();
  private readonly counters = new Map<number, number>();

  constructor(
    private readonly s: ModelSettings,
    start: number,
  ) {
    this.now = start;
  }

  take(): ModelEvent[] {
    const events = this.events;
    this.events = [];
    return events;
  }

  heartbeat(
    room: string,
    user: string,
    conn: string,
    state: string,
    capacity: number,
  ): ModelResult {
    let rec = this.expireOverdue(room, user);
    const joined = rec === null;
    if (joined && capacity > 0 && this.count(room) >= capacity) return { outcome: "full", seq: 0 };
    if (rec === null) {
      rec = {
        joinedAt: this.now,
        conns: [],
        typedAt: null,
        graceEnd: null,
        graceReason: null,
        state: "",
      };
      if (!this.rooms.has(room)) this.rooms.set(room, { members: new Map(), lastSeq: 0 });
    }
    let slot = rec.conns.findIndex((c) => c.id === conn);
    if (slot < 0) {
      slot = rec.conns.length;
      if (slot + 1 > MAX_CONNECTIONS) {
        slot = 0;
        rec.conns.forEach((c, i) => (c.beat < rec.conns[slot]!.beat ? (slot = i) : undefined));
      }
      rec.conns[slot] = { id: conn, beat: 0 };
    }
    rec.conns[slot]!.beat = this.now;
    rec.graceEnd = null;
    rec.graceReason = null;
    const changed = state !== "" && state !== rec.state;
    if (changed) rec.state = state;
    this.save(room, user, rec);
    if (joined) {
      const seq = this.publish(room, user, "join", {
        state: json(rec.state),
        ...this.roster(room),
      });
      return { outcome: "joined", seq };
    }
    if (changed) {
      return {
        outcome: "refreshed",
        seq: this.publish(room, user, "update", { state: json(state) }),
      };
    }
    return { outcome: "refreshed", seq: 0 };
  }

  leave(room: string, user: string, conn: string): ModelResult {
    const rec = this.expireOverdue(room, user);
    const slot = rec ? rec.conns.findIndex((c) => c.id === conn) : -1;
    if (!rec || slot < 0) return { outcome: "absent", seq: 0 };
    rec.conns.splice(slot, 1);
    if (rec.conns.length > 0) {
      this.save(room, user, rec);
      return { outcome: "removed", seq: 0 };
    }
    const [inGrace, seq] = this.lastConnectionGone(room, user, rec, "explicit", this.now);
    return inGrace ? { outcome: "leaving", seq: 0 } : { outcome: "left", seq };
  }

  startTyping(room: string, user: string): ModelResult {
    const rec = this.expireOverdue(room, user);
    if (!rec || rec.graceEnd !== null) return { outcome: "absent", seq: 0 };
    const started = rec.typedAt === null;
    rec.typedAt = this.now;
    this.save(room, user, rec);
    if (!started) return { outcome: "refreshed", seq: 0 };
    return { outcome: "started", seq: this.publish(room, user, "typing-start", {}) };
  }

  stopTyping(room: string, user: string): ModelResult {
    const rec = this.expireOverdue(room, user);
    if (!rec || rec.typedAt === null) return { outcome: "notTyping", seq: 0 };
    const seq = this.endTyping(room, user, rec, "explicit");
    this.save(room, user, rec);
    return { outcome: "stopped", seq };
  }

  setState(room: string, user: string, state: string): ModelResult {
    const rec = this.expireOverdue(room, user);
    if (!rec) return { outcome: "absent", seq: 0 };
    if (rec.state === state) return { outcome: "unchanged", seq: 0 };
    rec.state = state;
    this.save(room, user, rec);
    return { outcome: "updated", seq: this.publish(room, user, "update", { state: json(state) }) };
  }

  /** Expires everything due in the room, meeting its members in hash order. */
  sweep(room: string): SweepResult {
    const counts = { connections: 0, leaves: 0, typingStops: 0 };
    const members = [...(this.rooms.get(room)?.members ?? [])];
    // Those due, in the order of their ids.
    for (const [user, rec] of members.sort(([a], [b]) => compareIds(a, b))) {
      if (this.deadline(rec) > this.now) continue;
      const [, dropped, leaves, stops] = this.expire(room, user, rec);
      counts.connections += dropped;
      counts.leaves += leaves;
      counts.typingStops += stops;
    }
    return counts;
  }

  /** The room's keys vanish unannounced (their key-level expiry): no event, nothing kept. */
  lose(room: string): void {
    this.rooms.delete(room);
  }

  /** What count() shows: records as stored, whatever is overdue in them. */
  countOf(room: string): ModelCounts {
    const members = [...(this.rooms.get(room)?.members.values() ?? [])];
    return {
      users: members.length,
      connections: members.reduce((n, m) => n + m.conns.length, 0),
      typing: members.filter((m) => m.typedAt !== null).length,
    };
  }

  /** A bucket's counts, as its rooms add up. */
  bucketCounts(bucket: number): ModelCounts & { rooms: number } {
    const total = { rooms: 0, users: 0, connections: 0, typing: 0 };
    for (const room of this.rooms.keys()) {
      if (this.bucket(room) !== bucket) continue;
      const c = this.countOf(room);
      total.rooms += 1;
      total.users += c.users;
      total.connections += c.connections;
      total.typing += c.typing;
    }
    return total;
  }

  /** What roster() shows: records as stored, whatever is overdue in them. */
  rosterOf(room: string): ModelRoster {
    const r = this.rooms.get(room);
    if (!r)
      return { seq: this.counters.get(this.bucket(room)) ?? 0, count: 0, members: [], typing: [] };
    const members = [...r.members]
      .map(([user, m]) => ({
        user,
        connections: m.conns.length,
        lastSeen: m.graceEnd !== null ? m.graceEnd - this.s.leaveGraceMs : lastSeen(m),
        joinedAt: m.joinedAt,
        typedAt: m.typedAt,
        leavingAt: m.graceEnd,
        state: json(m.state),
      }))
      .sort((a, b) => compareIds(a.user, b.user));
    return {
      seq: r.lastSeq,
      count: members.length,
      members,
      typing: members.filter((m) => m.typedAt !== null).map((m) => m.user),
    };
  }

  private expireOverdue(room: string, user: string): Member | null {
    const rec = this.rooms.get(room)?.members.get(user) ?? null;
    if (rec && this.deadline(rec) <= this.now) return this.expire(room, user, rec)[0];
    return rec;
  }

  /** [the live record or null, connections dropped, leaves, typing stops] */
  private expire(room: string, user: string, rec: Member): [Member | null, number, number, number] {
    if (rec.graceEnd !== null) {
      this.removeMember(room, user, rec, rec.graceReason!);
      return [null, 0, 1, 0];
    }
    const live = rec.conns.filter((c) => c.beat + this.s.presenceWindowMs > this.now);
    const dropped = rec.conns.length - live.length;
    if (live.length === 0) {
      const stops = rec.typedAt !== null ? 1 : 0;
      const at = lastSeen(rec) + this.s.presenceWindowMs;
      const [inGrace] = this.lastConnectionGone(room, user, rec, "expired", at);
      return [inGrace, dropped, inGrace ? 0 : 1, stops];
    }
    rec.conns = live;
    let stops = 0;
    if (rec.typedAt !== null && rec.typedAt + this.s.typingWindowMs <= this.now) {
      this.endTyping(room, user, rec, "expired");
      stops = 1;
    }
    this.save(room, user, rec);
    return [rec, dropped, 0, stops];
  }

  /** [the record in its grace, or null with the seq of the leave published] */
  private lastConnectionGone(
    room: string,
    user: string,
    rec: Member,
    reason: "explicit" | "expired",
    at: number,
  ): [Member | null, number] {
    const grace = this.s.leaveGraceMs;
    if (grace === 0 || at + grace <= this.now)
      return [null, this.removeMember(room, user, rec, reason)];
    this.endTyping(room, user, rec, this.typingEnd(rec));
    rec.conns = [];
    rec.graceEnd = at + grace;
    rec.graceReason = reason;
    this.save(room, user, rec);
    return [rec, 0];
  }

  private removeMember(room: string, user: string, rec: Member, reason: string): number {
    this.endTyping(room, user, rec, this.typingEnd(rec));
    const r = this.rooms.get(room)!;
    r.members.delete(user);
    const seq = this.publish(room, user, "leave", { reason, ...this.roster(room) });
    if (r.members.size === 0) this.rooms.delete(room);
    return seq;
  }

  private endTyping(room: string, user: string, rec: Member, reason: string): number {
    if (rec.typedAt === null) return 0;
    rec.typedAt = null;
    return this.publish(room, user, "typing-stop", { reason });
  }

  private typingEnd(rec: Member): string {
    return rec.typedAt !== null && rec.typedAt + this.s.typingWindowMs <= this.now
      ? "expired"
      : "left";
  }

  private deadline(rec: Member): number {
    if (rec.graceEnd !== null) return rec.graceEnd;
    let at = Math.min(...rec.conns.map((c) => c.beat)) + this.s.presenceWindowMs;
    if (rec.typedAt !== null) at = Math.min(at, rec.typedAt + this.s.typingWindowMs);
    return at;
  }

  private save(room: string, user: string, rec: Member): void {
    this.rooms.get(room)!.members.set(user, rec);
  }

  private count(room: string): number {
    return this.rooms.get(room)?.members.size ?? 0;
  }

  private roster(room: string): { roster: string[]; count: number } {
    const users = [...(this.rooms.get(room)?.members.keys() ?? [])];
    return { roster: users, count: users.length };
  }

  private bucket(room: string): number {
    return bucketOf(room, this.s.buckets);
  }

  private publish(room: string, user: string, type: EventType, extra: object): number {
    const bucket = this.bucket(room);
    const seq = (this.counters.get(bucket) ?? 0) + 1;
    this.counters.set(bucket, seq);
    const r = this.rooms.get(room)!;
    const prev = r.lastSeq;
    r.lastSeq = seq;
    this.events.push({ type, room, user, at: this.now, seq, prev, ...extra });
    return seq;
  }
}

function lastSeen(m: Member): number {
  return Math.max(0, ...m.conns.map((c) => c.beat));
}

function json(state: string): unknown {
  return state === "" ? null : JSON.parse(state);
}
