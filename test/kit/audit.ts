/**
 * What a fault run recorded, checked against the invariants and measured: the events the log
 * consumer handled and what the streams hold at the end, what pub/sub delivered, and every call
 * result. Pure (no Redis, no I/O), shared by the cluster fault suite and the chaos runner.
 */
import type { EventType, PresenceEvent } from "../../src/index.js";
import { claimOf, History, type CallRecord, type Counts } from "./invariants.js";

/** One log entry: where it sits (its bucket's stream, its id) and the event it holds. */
export interface Logged {
  bucket: number;
  id: string;
  event: PresenceEvent;
}

export interface AuditInput {
  /** Every entry the log consumer handled, in the order it handled them, redeliveries included. */
  handled: readonly Logged[];
  /** What the buckets' streams hold once the run is over, each bucket in stream order. */
  stored: readonly Logged[];
  /** What the subscriber received, in order. */
  pubsub: readonly PresenceEvent[];
  /** Results of the calls that resolved (rejected ones are not results). */
  calls: readonly CallRecord[];
  bucketOf: (room: string) => number;
  /**
   * The fault may lose acknowledged writes (a forced failover, a killed master, a restart without
   * persistence): those are measured. Otherwise each one is a violation.
   */
  lossAllowed: boolean;
}

export interface AuditViolation {
  /** One of History's rules, or: reuse (a number carried by two different events), lost-write,
   * log-lost (handled, then gone from the log without a data-losing fault), lost-midway (a lost
   * entry followed by a kept one of its epoch), log-order (seq not increasing along a stream
   * within an epoch), unread (stored, never handled). */
  rule: string;
  room: string;
  user?: string;
  source?: string;
  detail: string;
}

export interface Audit {
  violations: AuditViolation[];
  /** Distinct events the log consumer handled. */
  events: number;
  /** Distinct events pub/sub delivered, and those of the log it never delivered. */
  pubsubSeen: number;
  pubsubMissed: number;
  /** Holes in pub/sub's chains (each makes a replica resync), and repeated deliveries. */
  pubsubGaps: number;
  pubsubDuplicates: number;
  /** Sequence spaces the log's events belong to. */
  epochs: number;
  /** Entries of the log holding an event already logged. */
  duplicates: number;
  /** Entries the consumer was handed again (at least once delivery). */
  redelivered: number;
  /** Acknowledged calls whose event the log does not hold at the end: their change was undone. */
  lostWrites: readonly CallRecord[];
  /** Of those, the ones whose event the consumer never handled either. */
  unlogged: number;
  /** Entries handled by the consumer that the log no longer holds at the end. */
  lostFromLog: number;
  /**
   * Members (and typists) the log leaves present for good: their room's last event was lost with
   * the data and nothing happened in the room since, so no new epoch tells a consumer to resync.
   */
  stranded: number;
  counts: Counts;
}

/** Numbers are unique per bucket within an epoch (the counter is the bucket's). */
const numberKey = (epoch: string, bucket: number, seq: number) => `${epoch}\n${bucket}\n${seq}`;
const eventKey = (epoch: string, room: string, seq: number) => `${epoch}\n${room}\n${seq}`;
const keyOf = (e: PresenceEvent) => eventKey(e.epoch, e.room, e.seq);

/** Stream ids compared as numbers: "ms-n". */
export function compareIds(a: string, b: string): number {
  const [am = 0, an = 0] = a.split("-").map(Number);
  const [bm = 0, bn = 0] = b.split("-").map(Number);
  return am - bm || an - bn;
}

/**
 * The log as one complete observer: each bucket's entries, epoch by epoch (in the order the
 * epochs first appear in the stream), by seq within an epoch. A consumer may be handed entries out
 * of order (claimed later, redelivered after a failover) and events of a master that lost them
 * interleave with the next epoch's: this order is the one the chains were written in.
 */
function logOrder(entries: readonly Logged[]): Logged[] {
  const epochStart = new Map<string, string>();
  for (const { bucket, id, event } of entries) {
    const key = `${bucket}\n${event.epoch}`;
    const start = epochStart.get(key);
    if (start === undefined || compareIds(id, start) < 0) epochStart.set(key, id);
  }
  const start = (l: Logged) => epochStart.get(`${l.bucket}\n${l.event.epoch}`)!;
  return [...entries].sort(
    (a, b) =>
      a.bucket - b.bucket ||
      compareIds(start(a), start(b)) ||
      a.event.epoch.localeCompare(b.event.epoch) ||
      a.event.seq - b.event.seq ||
      compareIds(a.id, b.id),
  );
}

export function audit(input: AuditInput): Audit {
  const violations: AuditViolation[] = [];
  const flag = (rule: string, e: PresenceEvent, detail: string, source?: string) =>
    violations.push({ rule, room: e.room, user: e.user, detail, ...(source ? { source } : {}) });

  // Redeliveries of one entry are the consumer's at-least-once delivery, not the log's content.
  const entries = new Map<string, Logged>();
  for (const l of input.handled) {
    const key = `${l.bucket}\n${l.id}\n${keyOf(l.event)}`;
    if (!entries.has(key)) entries.set(key, l);
  }
  const handled = logOrder([...entries.values()]);
  const logKeys = new Set(handled.map((l) => keyOf(l.event)));

  // The streams themselves: every entry handled, seq increasing within an epoch.
  const storedIds = new Set<string>();
  const handledIds = new Set(handled.map((l) => `${l.bucket}\n${l.id}`));
  const lastSeq = new Map<string, number>();
  for (const { bucket, id, event } of input.stored) {
    storedIds.add(`${bucket}\n${id}`);
    if (!handledIds.has(`${bucket}\n${id}`)) {
      flag("unread", event, `entry ${id} of bucket ${bucket} never handled`);
    }
    const epochKey = `${bucket}\n${event.epoch}`;
    const last = lastSeq.get(epochKey) ?? 0;
    if (event.seq <= last) {
      flag("log-order", event, `#${event.seq} after #${last} in ${event.epoch} (bucket ${bucket})`);
    }
    lastSeq.set(epochKey, event.seq);
  }
  // Entries handled, then gone: a master that lost its last writes. A replica holds a prefix of
  // its master's history, so what is lost is the end of an epoch, never a number in its middle.
  let lostFromLog = 0;
  for (const { bucket, id, event } of handled) {
    if (storedIds.has(`${bucket}\n${id}`)) continue;
    lostFromLog++;
    if (!input.lossAllowed) flag("log-lost", event, `entry ${id} handled, then gone from the log`);
    const last = lastSeq.get(`${bucket}\n${event.epoch}`) ?? 0;
    if (event.seq <= last) {
      flag("lost-midway", event, `#${event.seq} of ${event.epoch} lost, #${last} after it kept`);
    }
  }

  // Acknowledged calls whose event the log lacks at the end: writes undone with the data.
  const storedKeys = new Set(input.stored.map((l) => keyOf(l.event)));
  const lostWrites: CallRecord[] = [];
  const kept: CallRecord[] = [];
  let unlogged = 0;
  for (const call of input.calls) {
    const event = call.result.event;
    const key = event && eventKey(event.epoch, call.room, event.seq);
    if (key !== null && !storedKeys.has(key)) lostWrites.push(call);
    if (key === null || logKeys.has(key)) kept.push(call);
    else unlogged++;
  }
  if (!input.lossAllowed) {
    for (const call of lostWrites) {
      violations.push({
        rule: "lost-write",
        room: call.room,
        user: call.user,
        detail: `${call.op} acknowledged #${call.result.event?.seq} in ${call.result.event?.epoch}, not in the log`,
      });
    }
  }

  // The invariants over the log (complete, and quiet at the end) and the calls it can judge.
  const history = new History();
  for (const l of handled) history.addEvent(l.event, "log");
  for (const call of kept) history.addCall(call);
  const report = history.check({ complete: ["log"], quiet: true });
  // A room whose last logged event was lost with the data, and that saw no event since, never
  // tells the log that its members are gone: no leave, and no new epoch to resync on. Counted.
  const lastOf = new Map<string, PresenceEvent>();
  for (const { event } of handled) lastOf.set(event.room, event);
  let stranded = 0;
  for (const v of report.violations) {
    const last = lastOf.get(v.room);
    if (v.rule === "quiet-end" && input.lossAllowed && last && !storedKeys.has(keyOf(last))) {
      stranded++;
    } else {
      violations.push(v);
    }
  }

  // Pub/sub delivers at most once: what it saw must follow the rules wherever no gap explains
  // otherwise, but events it lost at the end leave no gap to see, so it is not judged quiet.
  const alone = new History();
  for (const e of input.pubsub) alone.addEvent(e, "pubsub");
  const pubsubReport = alone.check();
  violations.push(...pubsubReport.violations);
  const pubsubKeys = new Set(input.pubsub.map(keyOf));

  // No number is ever carried by two different events, whoever saw them or claimed them.
  const numbers = new Map<string, { what: string; room: string; type: EventType; user: string }>();
  const claim = (key: string, e: { room: string; type: EventType; user: string }, what: string) => {
    const earlier = numbers.get(key);
    if (!earlier) return void numbers.set(key, { ...e, what });
    if (earlier.room !== e.room || earlier.type !== e.type || earlier.user !== e.user) {
      const [epoch, bucket, seq] = key.split("\n");
      violations.push({
        rule: "reuse",
        room: e.room,
        user: e.user,
        detail:
          `#${seq} of bucket ${bucket} in ${epoch}: ${what} ${e.type} of ${e.user} in ${e.room}, ` +
          `${earlier.what} ${earlier.type} of ${earlier.user} in ${earlier.room}`,
      });
    }
  };
  const atOf = new Map<string, number>();
  const observed = (e: PresenceEvent, what: string) => {
    const key = numberKey(e.epoch, input.bucketOf(e.room), e.seq);
    const at = atOf.get(key);
    if (at !== undefined && at !== e.at) {
      flag("reuse", e, `#${e.seq} in ${e.epoch} ${what} with another time than before`);
    }
    atOf.set(key, e.at);
    claim(key, e, what);
  };
  for (const l of handled) observed(l.event, "logged");
  for (const e of input.pubsub) observed(e, "published");
  for (const call of input.calls) {
    const c = claimOf(call);
    const event = call.result.event;
    if (!c || !event) continue;
    claim(
      numberKey(event.epoch, input.bucketOf(call.room), event.seq),
      { room: call.room, user: call.user, type: c.type },
      `claimed by ${call.op}:`,
    );
  }

  return {
    violations,
    events: logKeys.size,
    pubsubSeen: pubsubKeys.size,
    pubsubMissed: [...logKeys].filter((k) => !pubsubKeys.has(k)).length,
    pubsubGaps: pubsubReport.counts.gaps,
    pubsubDuplicates: pubsubReport.counts.duplicates,
    epochs: new Set(handled.map((l) => l.event.epoch)).size,
    duplicates: report.counts.duplicates,
    redelivered: input.handled.length - entries.size,
    lostWrites,
    unlogged,
    lostFromLog,
    stranded,
    counts: report.counts,
  };
}

/** A markdown table of rows with the same keys, columns padded. */
export function table(rows: readonly Record<string, string | number>[]): string {
  if (rows.length === 0) return "";
  const columns = Object.keys(rows[0]!);
  const cells = [columns, ...rows.map((r) => columns.map((c) => String(r[c] ?? "")))];
  const widths = columns.map((_, i) => Math.max(3, ...cells.map((row) => row[i]!.length)));
  const line = (row: string[]) => `| ${row.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [
    line(cells[0]!),
    `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`,
    ...cells.slice(1).map(line),
  ].join("\n");
}

/** A few violations, one per line, for a failure message. */
export function explain(violations: readonly AuditViolation[], max = 20): string {
  const lines = violations
    .slice(0, max)
    .map(
      (v) => `${v.rule}${v.source ? ` [${v.source}]` : ""} ${v.room}/${v.user ?? "-"}: ${v.detail}`,
    );
  if (violations.length > max) lines.push(`… and ${violations.length - max} more`);
  return lines.join("\n");
}
