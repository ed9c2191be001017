/**
 * Checks a recorded history against the invariants of docs/design.md: the events one or more
 * observers saw (a subscriber, the durable log) and the calls made with what they replied. Pure:
 * no Redis, no I/O, so fault tests and the chaos runner share it.
 */
import type {
  EventType,
  HeartbeatResult,
  JoinEvent,
  LeaveEvent,
  LeaveResult,
  PresenceEvent,
  StateResult,
  StopTypingResult,
  TypingResult,
} from "../../src/index.js";

/** One engine call and its reply, as the caller received it. */
export type CallRecord = { room: string; user: string } & (
  | { op: "heartbeat"; result: HeartbeatResult }
  | { op: "leave"; result: LeaveResult }
  | { op: "startTyping"; result: TypingResult }
  | { op: "stopTyping"; result: StopTypingResult }
  | { op: "setState"; result: StateResult }
);

export type Rule =
  /** Each event reaches an observer once (the log must hold it exactly once). */
  | "duplicate"
  /** Invariant 1: join, leave, join, … per (room, user), and only members publish updates. */
  | "presence"
  /** Invariant 3: typing-start, typing-stop, … per (room, user). */
  | "typing"
  /** Invariant 3: typing never outlives presence (the engine stops typing before a leave). */
  | "typing-presence"
  /** Invariant 4: each event's prev is the room's previous event, or 0 after it emptied. */
  | "prev"
  /** Invariant 4: a complete observer (the log) has no hole in any chain. */
  | "gap"
  /** Invariant 9: seq strictly increases along a room's chain within an epoch. */
  | "seq-order"
  /** join/leave `count` is the room's membership after the change. */
  | "count"
  /** Invariant 8: a result's flags agree with whether it names an event. */
  | "call-result"
  /** Invariant 8: the event a result names was published, with the call's type and user. */
  | "call-event"
  /** Invariant 8: no two calls claim one event (the bug of replies after a resend). */
  | "double-claim"
  /** Invariant 2 and 3: once quiet and swept, nobody is left present or typing. */
  | "quiet-end";

export interface Violation {
  rule: Rule;
  room: string;
  user?: string;
  /** The observer whose events show it; absent for call rules. */
  source?: string;
  detail: string;
}

export interface Counts {
  joins: number;
  leaves: number;
  typingStarts: number;
  typingStops: number;
  updates: number;
  /** Repeated deliveries of an event to one observer. */
  duplicates: number;
  epochs: number;
  /** Chain holes: events an observer missed. */
  gaps: number;
}

export interface Report {
  /** Distinct events, whichever observers saw them. */
  events: number;
  calls: number;
  violations: Violation[];
  counts: Counts;
}

export interface CheckOptions {
  /** Observers that saw every event (the durable log), by source; true: all of them. */
  complete?: boolean | readonly string[];
  /** The system was left quiet and fully swept. */
  quiet?: boolean;
}

/** The source of events added without one. */
export const DEFAULT_SOURCE = "observer";

const TYPE_COUNTS: Record<EventType, keyof Counts> = {
  join: "joins",
  leave: "leaves",
  "typing-start": "typingStarts",
  "typing-stop": "typingStops",
  update: "updates",
};

/** Events are identified by their number within the epoch; the room makes lookups exact. */
const eventKey = (epoch: string, room: string, seq: number) => `${epoch}\n${room}\n${seq}`;
const keyOf = (e: PresenceEvent) => eventKey(e.epoch, e.room, e.seq);
const label = (e: PresenceEvent) => `${e.type} of ${e.user} #${e.seq} (prev ${e.prev})`;
const reasonOf = (e: PresenceEvent) => ("reason" in e ? e.reason : undefined);

export class History {
  private readonly observed = new Map<string, PresenceEvent[]>();
  private readonly calls: CallRecord[] = [];

  /** An event as one observer saw it, in the order it saw them. */
  addEvent(event: PresenceEvent, source = DEFAULT_SOURCE): void {
    const events = this.observed.get(source) ?? [];
    events.push(event);
    this.observed.set(source, events);
  }

  addCall(call: CallRecord): void {
    this.calls.push(call);
  }

  check(options: CheckOptions = {}): Report {
    const findings = new Findings();
    const observers = new Map<string, Observer>();
    for (const [source, events] of this.observed) {
      const observer = new Observer(source, isComplete(options.complete, source), findings);
      for (const event of events) observer.observe(event);
      if (options.quiet) observer.checkQuiet();
      observers.set(source, observer);
    }
    const distinct = distinctEvents(this.observed);
    countEvents(distinct, findings.counts);
    new CallCheck(distinct, witness(options.complete, observers, distinct), findings).run(
      this.calls,
    );
    return {
      events: distinct.size,
      calls: this.calls.length,
      violations: findings.violations,
      counts: findings.counts,
    };
  }
}

function isComplete(complete: CheckOptions["complete"], source: string): boolean {
  return typeof complete === "object" ? complete.includes(source) : complete === true;
}

/** Whether every complete observer saw an event; null when none is complete. */
function witness(
  complete: CheckOptions["complete"],
  observers: ReadonlyMap<string, Observer>,
  distinct: ReadonlyMap<string, PresenceEvent>,
): ((key: string) => boolean) | null {
  if (complete === true) return (key) => distinct.has(key);
  if (typeof complete !== "object") return null;
  return (key) => complete.every((source) => observers.get(source)?.saw(key) ?? false);
}

function distinctEvents(observed: ReadonlyMap<string, PresenceEvent[]>) {
  const distinct = new Map<string, PresenceEvent>();
  for (const events of observed.values()) {
    for (const e of events) if (!distinct.has(keyOf(e))) distinct.set(keyOf(e), e);
  }
  return distinct;
}

function countEvents(distinct: ReadonlyMap<string, PresenceEvent>, counts: Counts): void {
  const epochs = new Set<string>();
  for (const e of distinct.values()) {
    counts[TYPE_COUNTS[e.type]]++;
    epochs.add(e.epoch);
  }
  counts.epochs = epochs.size;
}

class Findings {
  readonly violations: Violation[] = [];
  readonly counts: Counts = {
    joins: 0,
    leaves: 0,
    typingStarts: 0,
    typingStops: 0,
    updates: 0,
    duplicates: 0,
    epochs: 0,
    gaps: 0,
  };

  flag(violation: Violation): void {
    this.violations.push(violation);
  }
}

/** What an observer knows of a user: undefined while it cannot tell (after a resync). */
interface UserView {
  present?: boolean;
  typing?: boolean;
}

/** One room as one observer replays it. */
class RoomView {
  epoch: string | undefined;
  last: PresenceEvent | undefined;
  /** Replayed from an empty room on: anyone not in `users` is absent and not typing. */
  known = true;
  readonly users = new Map<string, UserView>();

  /** The observer lost the thread (another epoch, a gap): it knows nobody until the room empties. */
  resync(): void {
    this.users.clear();
    this.known = false;
  }

  emptied(): void {
    this.users.clear();
    this.known = true;
  }

  user(name: string): UserView {
    let view = this.users.get(name);
    if (!view) {
      view = this.known ? { present: false, typing: false } : {};
      this.users.set(name, view);
    }
    return view;
  }

  size(): number {
    return [...this.users.values()].filter((u) => u.present === true).length;
  }
}

/** Replays one observer's events in the order it saw them. */
class Observer {
  private readonly seen = new Map<string, PresenceEvent>();
  private readonly rooms = new Map<string, RoomView>();

  constructor(
    readonly source: string,
    private readonly complete: boolean,
    private readonly findings: Findings,
  ) {}

  saw(key: string): boolean {
    return this.seen.has(key);
  }

  observe(e: PresenceEvent): void {
    const earlier = this.seen.get(keyOf(e));
    if (earlier) return this.repeated(earlier, e);
    this.seen.set(keyOf(e), e);
    const room = this.rooms.get(e.room) ?? new RoomView();
    this.rooms.set(e.room, room);
    this.follow(room, e);
    this.apply(room, e);
  }

  /** A number seen before: the same event delivered again, or the number reused by another. */
  private repeated(earlier: PresenceEvent, e: PresenceEvent): void {
    const same = earlier.type === e.type && earlier.user === e.user && earlier.at === e.at;
    if (same) {
      this.findings.counts.duplicates++;
      this.flag("duplicate", e, `${label(e)} in ${e.epoch} seen again`);
    } else {
      this.flag("seq-order", e, `${label(e)} reuses the number of ${label(earlier)}`);
    }
  }

  /** Nobody may be left present or typing; users the observer lost track of are not judged. */
  checkQuiet(): void {
    for (const [name, room] of this.rooms) {
      for (const [user, view] of room.users) {
        if (view.present) this.flagQuiet(name, user, "still present at the end");
        if (view.typing) this.flagQuiet(name, user, "still typing at the end");
      }
    }
  }

  /** The chain: the room's first event starts from empty; another epoch is a resync. */
  private follow(room: RoomView, e: PresenceEvent): void {
    if (room.last === undefined) {
      if (e.prev !== 0) this.gap(room, e, `the room's first event ${label(e)} follows another`);
    } else if (room.epoch !== e.epoch) {
      room.resync(); // its prev names an event of the old epoch
    } else {
      this.link(room, room.last, e);
    }
    if (e.prev === 0) room.emptied();
    room.epoch = e.epoch;
    room.last = e;
  }

  private link(room: RoomView, last: PresenceEvent, e: PresenceEvent): void {
    if (e.seq <= last.seq) {
      this.flag("seq-order", e, `${label(e)} after #${last.seq} in ${e.epoch}`);
      return;
    }
    const expected = last.type === "leave" && last.count === 0 ? 0 : last.seq;
    if (e.prev === expected) return;
    // Missed events explain a link past the last one seen, or (unless nothing can be missed) a
    // restart at 0 after a missed leave that emptied the room.
    const skipped = e.prev > last.seq && e.prev < e.seq;
    if (skipped || (e.prev === 0 && !this.complete)) {
      this.gap(room, e, `${label(e)} after #${last.seq}: events missed`);
    } else {
      this.flag("prev", e, `${label(e)} after #${last.seq}: expected prev ${expected}`);
    }
  }

  /** A hole: a loss for a subscriber, a violation for a complete observer. Either way, resync. */
  private gap(room: RoomView, e: PresenceEvent, detail: string): void {
    this.findings.counts.gaps++;
    if (this.complete) this.flag("gap", e, detail);
    room.resync();
  }

  private apply(room: RoomView, e: PresenceEvent): void {
    const user = room.user(e.user);
    switch (e.type) {
      case "join":
        if (user.present === true) this.flag("presence", e, `${label(e)} while present`);
        user.present = true;
        this.checkCount(room, e);
        break;
      case "leave":
        if (user.present === false) this.flag("presence", e, `${label(e)} while absent`);
        if (user.typing === true) this.flag("typing-presence", e, `${label(e)} while typing`);
        user.present = false;
        user.typing = false;
        this.checkCount(room, e);
        break;
      case "typing-start":
        if (user.present === false) this.flag("typing-presence", e, `${label(e)} while absent`);
        if (user.typing === true) this.flag("typing", e, `${label(e)} while typing`);
        user.typing = true;
        break;
      case "typing-stop":
        if (user.present === false) this.flag("typing-presence", e, `${label(e)} while absent`);
        if (user.typing === false) this.flag("typing", e, `${label(e)} while not typing`);
        user.typing = false;
        break;
      case "update":
        if (user.present === false) this.flag("presence", e, `${label(e)} while absent`);
        break;
    }
  }

  /** Only a room replayed from empty knows its membership; a broken chain has resynced. */
  private checkCount(room: RoomView, e: JoinEvent | LeaveEvent): void {
    if (room.known && room.size() !== e.count) {
      this.flag("count", e, `${label(e)} says count ${e.count}, replay has ${room.size()}`);
    }
  }

  private flag(rule: Rule, e: PresenceEvent, detail: string): void {
    this.findings.flag({ rule, room: e.room, user: e.user, source: this.source, detail });
  }

  private flagQuiet(room: string, user: string, detail: string): void {
    this.findings.flag({ rule: "quiet-end", room, user, source: this.source, detail });
  }
}

/** The event a call's flags say it published. */
export interface Claim {
  type: EventType;
  reason?: "explicit";
}

/** What a call's flags claim it published, or null when they say it published nothing. */
export function claimOf(call: CallRecord): Claim | null {
  switch (call.op) {
    case "heartbeat":
      if (call.result.joined) return { type: "join" };
      return call.result.event ? { type: "update" } : null;
    case "leave":
      return call.result.left ? { type: "leave", reason: "explicit" } : null;
    case "startTyping":
      return call.result.started ? { type: "typing-start" } : null;
    case "stopTyping":
      return call.result.stopped ? { type: "typing-stop", reason: "explicit" } : null;
    case "setState":
      return call.result.updated ? { type: "update" } : null;
  }
}

/** Calls against the events: each names the event it published, and no other call names it. */
class CallCheck {
  private readonly claimed = new Set<string>();

  constructor(
    private readonly distinct: ReadonlyMap<string, PresenceEvent>,
    private readonly witnessed: ((key: string) => boolean) | null,
    private readonly findings: Findings,
  ) {}

  run(calls: readonly CallRecord[]): void {
    for (const call of calls) this.check(call);
  }

  private check(call: CallRecord): void {
    const claim = claimOf(call);
    const { event } = call.result;
    if ((claim === null) !== (event === null)) {
      this.flag("call-result", call, `flags ${JSON.stringify(call.result)} disagree`);
    }
    if (claim === null || event === null) return;
    const key = eventKey(event.epoch, call.room, event.seq);
    if (this.claimed.has(key)) this.flag("double-claim", call, `#${event.seq} claimed again`);
    this.claimed.add(key);
    if (this.witnessed && !this.witnessed(key)) {
      this.flag("call-event", call, `names #${event.seq} in ${event.epoch}, never published`);
    }
    const observed = this.distinct.get(key);
    if (observed) this.match(call, claim, observed);
  }

  private match(call: CallRecord, claim: Claim, e: PresenceEvent): void {
    const reason = claim.reason === undefined || reasonOf(e) === claim.reason;
    if (e.type !== claim.type || e.user !== call.user || !reason) {
      const wanted = `${claim.type}${claim.reason ? ` (${claim.reason})` : ""}`;
      this.flag("call-event", call, `expected ${wanted} of ${call.user}, names ${label(e)}`);
    }
  }

  private flag(rule: Rule, call: CallRecord, detail: string): void {
    const { room, user, op } = call;
    this.findings.flag({ rule, room, user, detail: `${op}: ${detail}` });
  }
}
