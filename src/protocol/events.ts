import { UnexpectedReplyError } from "./errors.js";
import type { MemberState } from "./state.js";

/** Fields every event carries. Version 2 of the schema. */
interface EventBase {
  v: 2;
  room: string;
  user: string;
  /** Redis server time of the change, ms since the epoch. */
  at: number;
  /**
   * The sequence space `seq` belongs to. It changes when Redis may have lost events (a restart, a
   * failover, a migrated slot): a consumer that sees another epoch must resync, never continue.
   */
  epoch: string;
  /** The event's sequence number: increases with every event of the room within the epoch. */
  seq: number;
  /** The sequence number of the room's previous event, or 0 if the room was empty before it. */
  prev: number;
  /** The event's id in its bucket's log (a Redis stream), when the log is on. */
  log?: string;
}

export interface JoinEvent extends EventBase {
  type: "join";
  state: MemberState | null;
  /** Members after the join, at most `eventRosterLimit` of them; `count` is the exact number. */
  roster: string[];
  count: number;
}

export interface LeaveEvent extends EventBase {
  type: "leave";
  reason: "explicit" | "expired";
  roster: string[];
  count: number;
}

export interface TypingStartEvent extends EventBase {
  type: "typing-start";
}

export interface TypingStopEvent extends EventBase {
  type: "typing-stop";
  /** explicit: stopTyping; expired: the typing window passed; left: the user left the room. */
  reason: "explicit" | "expired" | "left";
}

export interface UpdateEvent extends EventBase {
  type: "update";
  state: MemberState | null;
}

export type PresenceEvent =
  JoinEvent | LeaveEvent | TypingStartEvent | TypingStopEvent | UpdateEvent;

/** Whether an event carries the room's member count after it: a join or a leave does. */
export function carriesCount(event: PresenceEvent): event is JoinEvent | LeaveEvent {
  return event.type === "join" || event.type === "leave";
}
export type EventType = PresenceEvent["type"];
export const EVENT_TYPES: readonly EventType[] = [
  "join",
  "leave",
  "typing-start",
  "typing-stop",
  "update",
];

/** Identifies the event a call published: its number within its epoch. */
export interface EventId {
  epoch: string;
  seq: number;
}

type Json = Record<string, unknown>;

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isState = (v: unknown) => v === null || (typeof v === "object" && !Array.isArray(v));
const isRoster = (v: unknown) => Array.isArray(v) && v.every((u) => typeof u === "string");

const shapes: Record<EventType, (e: Json) => boolean> = {
  join: (e) => isState(e.state) && isRoster(e.roster) && isCount(e.count),
  leave: (e) =>
    (e.reason === "explicit" || e.reason === "expired") && isRoster(e.roster) && isCount(e.count),
  "typing-start": () => true,
  "typing-stop": (e) => e.reason === "explicit" || e.reason === "expired" || e.reason === "left",
  update: (e) => isState(e.state),
};

/** Checks that a parsed value is a rollcall v2 event; anything else is an error. */
export function checkEvent(value: unknown): PresenceEvent {
  const e = value as Json;
  const ok =
    typeof e === "object" &&
    e !== null &&
    e.v === 2 &&
    typeof e.room === "string" &&
    typeof e.user === "string" &&
    isCount(e.at) &&
    typeof e.epoch === "string" &&
    e.epoch !== "" &&
    isCount(e.seq) &&
    isCount(e.prev) &&
    (e.log === undefined || typeof e.log === "string") &&
    typeof e.type === "string" &&
    Object.hasOwn(shapes, e.type) &&
    shapes[e.type as EventType](e);
  if (!ok) throw new UnexpectedReplyError("event", value);
  return e as unknown as PresenceEvent;
}

/**
 * Parses one published message; anything that is not a rollcall v2 event is an error. A message
 * from a room's channel ends with a "mac" (the deployment's signature, which a Subscriber checks
 * before it believes the message): it is not part of the event, and is left out.
 */
export function parseEvent(message: string): PresenceEvent {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    throw new UnexpectedReplyError("event (not JSON)", message);
  }
  if (typeof value === "object" && value !== null) delete (value as { mac?: unknown }).mac;
  return checkEvent(value);
}
