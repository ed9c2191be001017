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
  StatusChange,
  StopTypingResult,
  TypingResult,
  UserStatus,
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
  | "quiet-end"
  /** Users' status: online, offline, online, … per user; seq increasing along a users channel. */
  | "status"
  /** Users' status: an offline published while the user was in a room is followed by an online. */
  | "status-early"
  /** Users' status, settled: online iff in some roster, as the last transition seen says. */
  | "status-end";

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

  /** The rooms this observer knows `user` is in: it saw the join, and every event since. */
  roomsOf(user: string): string[] {
    return [...this.rooms]
      .filter(([, room]) => room.users.get(user)?.present === true)
      .map(([name]) => name);
  }

  /** Its connection was lost: what was published meanwhile is unknown, in every room. */
  lose(): void {
    for (const room of this.rooms.values()) room.resync();
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

/**
 * What one subscriber of every room's channel and every bucket's users channel saw, on one
 * connection, in the order it saw it: Redis writes a connection its messages in the order it
 * published them, so a transition's place among the room events is where Redis made it.
 */
export type Sighting =
  | { kind: "event"; event: PresenceEvent }
  | { kind: "status"; bucket: number; change: StatusChange }
  /** The connection closed: what was published until it subscribed again is lost. */
  | { kind: "lost" };

/** The deployment once quiet and settled: what the last transitions seen are judged by. */
export interface SettledEnd {
  /** Every user's status() at the end. */
  statuses: readonly UserStatus[];
  /** The users some room's roster lists at the end. */
  rostered: ReadonlySet<string>;
  userBucket: (user: string) => number;
}

export interface StatusCounts {
  online: number;
  offline: number;
  /** Transitions of a user whose status the observer knew: checked for alternation. */
  judged: number;
  /** Holes in a users channel's chain, and connections lost: each time, users not known. */
  gaps: number;
  losses: number;
  /**
   * Offlines published while the rooms showed the user present (joined, every event since
   * seen): the join's user change not applied yet, a drain's lag. Of those, the ones an online
   * of the user followed, and the ones the observer lost track of first.
   */
  early: number;
  repaired: number;
  untracked: number;
  /** The longest an early offline stood before its online (Redis time), ms. */
  longestEarlyMs: number;
  /** Users whose last transition seen was judged against their status at the end. */
  endJudged: number;
}

export interface StatusReport {
  violations: Violation[];
  counts: StatusCounts;
}

/**
 * Checks users' online and offline transitions against each other, against the room events the
 * same subscriber saw, and against the settled end (when given). Pub/sub loses messages: a
 * user's status is known only from a transition seen on an unbroken chain of their bucket's
 * channel (no gap, no other epoch, no lost connection since), a user's presence in a room only
 * from a join seen on an unbroken chain of the room's, and only what is known is judged:
 * - a user known online never goes online again, known offline never offline again;
 * - an offline of a user the rooms show present is the lag of a drain (as long as a fault keeps
 *   drains from running: measured, not judged): that join's change waits to be applied, and
 *   applying it makes an online. So, once settled, an online must have followed it, unless the
 *   observer lost track of the user first;
 * - at the end, each user's status() is online iff some roster lists them, and the last
 *   transition seen of a user still known says the same.
 */
export function checkStatus(sightings: readonly Sighting[], end?: SettledEnd): StatusReport {
  return new StatusCheck().run(sightings, end);
}

/** One bucket's users channel as the observer follows it. */
class UsersView {
  epoch: string | undefined;
  seq: number | undefined;
  /** Followed from a transition that started the chain (prev 0): nobody else is online. */
  known: boolean;
  /** Users known online (true) or offline (false). */
  readonly users = new Map<string, boolean>();

  constructor(known: boolean) {
    this.known = known;
  }

  resync(): void {
    this.users.clear();
    this.known = false;
  }

  /** The chain starts (its counter new with the bucket's data): every user was offline. */
  started(): void {
    this.users.clear();
    this.known = true;
  }

  /** Online, offline, or undefined while the observer cannot tell. */
  status(user: string): boolean | undefined {
    return this.users.get(user) ?? (this.known ? false : undefined);
  }
}

/** An offline published while the rooms showed its user present. */
interface Early {
  change: StatusChange;
  bucket: number;
  rooms: string[];
}

const transitionLabel = (c: StatusChange) =>
  `${c.type} of ${c.user} #${c.seq} (prev ${c.prev}) in ${c.epoch}`;

class StatusCheck {
  private readonly violations: Violation[] = [];
  private readonly counts: StatusCounts = {
    online: 0,
    offline: 0,
    judged: 0,
    gaps: 0,
    losses: 0,
    early: 0,
    repaired: 0,
    untracked: 0,
    longestEarlyMs: 0,
    endJudged: 0,
  };
  /** The rooms as the same subscriber saw them (their own rules are the subscriber audit's). */
  private readonly rooms = new Observer("status subscriber", false, new Findings());
  private readonly buckets = new Map<number, UsersView>();
  /** Early offlines no online has followed yet, by user. */
  private readonly early = new Map<string, Early>();

  run(sightings: readonly Sighting[], end: SettledEnd | undefined): StatusReport {
    for (const s of sightings) {
      if (s.kind === "event") this.rooms.observe(s.event);
      else if (s.kind === "status") this.transition(s.bucket, s.change);
      else this.lose();
    }
    if (end) this.checkEnd(end);
    return { violations: this.violations, counts: this.counts };
  }

  /** A bucket first heard of after a lost connection may have lost transitions: unknown. */
  private view(bucket: number): UsersView {
    let view = this.buckets.get(bucket);
    if (!view) {
      view = new UsersView(this.counts.losses === 0);
      this.buckets.set(bucket, view);
    }
    return view;
  }

  private lose(): void {
    this.counts.losses++;
    this.rooms.lose();
    for (const bucket of this.buckets.keys()) this.resync(bucket);
  }

  /** The observer lost the thread of a bucket: its users' status, and their early offlines. */
  private resync(bucket: number): void {
    this.view(bucket).resync();
    for (const [user, early] of this.early) {
      if (early.bucket !== bucket) continue;
      this.counts.untracked++;
      this.early.delete(user);
    }
  }

  private transition(bucket: number, c: StatusChange): void {
    this.follow(bucket, c);
    const view = this.view(bucket);
    const online = c.type === "online";
    const before = view.status(c.user);
    this.counts[c.type]++;
    if (before !== undefined) {
      this.counts.judged++;
      if (before === online) this.flag("status", `users ${bucket}`, c, `while ${c.type}`);
    }
    view.users.set(c.user, online);
    const early = this.early.get(c.user);
    if (online && early) {
      this.counts.repaired++;
      this.counts.longestEarlyMs = Math.max(this.counts.longestEarlyMs, c.at - early.change.at);
      this.early.delete(c.user);
    }
    const rooms = online ? [] : this.rooms.roomsOf(c.user);
    if (rooms.length > 0) {
      this.counts.early++;
      this.early.set(c.user, { change: c, bucket, rooms });
    }
  }

  /** The bucket's chain: seq increasing within an epoch, each prev the last one seen. */
  private follow(bucket: number, c: StatusChange): void {
    const view = this.view(bucket);
    if (view.seq !== undefined && view.epoch === c.epoch) {
      if (c.seq <= view.seq) {
        this.flag("status", `users ${bucket}`, c, `after #${view.seq}`);
        this.resync(bucket);
      } else if (c.prev !== view.seq) {
        this.counts.gaps++;
        this.resync(bucket);
      }
    } else if (view.seq !== undefined || c.prev !== 0) {
      // Another epoch (its first prev may be the old chain's: numbers are unique per epoch
      // only), or a first transition heard that follows others.
      if (view.seq === undefined && view.known) this.counts.gaps++;
      this.resync(bucket);
    }
    if (c.prev === 0) view.started();
    view.epoch = c.epoch;
    view.seq = c.seq;
  }

  private checkEnd(end: SettledEnd): void {
    for (const { change, rooms } of this.early.values()) {
      this.flag(
        "status-early",
        rooms.join(","),
        change,
        `while in ${rooms.join(", ")}, no online since`,
      );
    }
    for (const status of end.statuses) {
      const { user, online } = status;
      const bucket = end.userBucket(user);
      const listed = end.rostered.has(user);
      const word = (on: boolean) => (on ? "online" : "offline");
      if (online !== listed) {
        this.flagUser(
          bucket,
          user,
          `status() says ${word(online)}, ${listed ? "a" : "no"} roster lists them`,
        );
      }
      const seen = this.view(bucket).status(user);
      if (seen === undefined) continue;
      this.counts.endJudged++;
      if (seen !== online) {
        this.flagUser(
          bucket,
          user,
          `status() says ${word(online)}, the last transition seen ${word(seen)}`,
        );
      }
    }
  }

  private flag(rule: Rule, room: string, c: StatusChange, detail: string): void {
    const what = `${transitionLabel(c)} ${detail}`;
    this.violations.push({ rule, room, user: c.user, source: "status subscriber", detail: what });
  }

  private flagUser(bucket: number, user: string, detail: string): void {
    this.violations.push({
      rule: "status-end",
      room: `users ${bucket}`,
      user,
      detail: `at the end, ${detail}`,
    });
  }
}
