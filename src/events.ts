import { UnexpectedReplyError } from "./errors.js";
import type { MemberState } from "./memberState.js";

/** Fields every event carries. Version 1 of the schema. */
interface EventBase {
  v: 1;
  room: string;
  user: string;
  /** Redis server time of the change, ms since the epoch. */
  at: number;
  /** The event's sequence number: increases with every event of the room. */
  seq: number;
  /** The sequence number of the room's previous event, or 0 if the room was empty before it. */
  prev: number;
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
export type EventType = PresenceEvent["type"];
export const EVENT_TYPES: readonly EventType[] = [
  "join",
  "leave",
  "typing-start",
  "typing-stop",
  "update",
];

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

/** Parses one published message; anything that is not a rollcall v1 event is an error. */
export function parseEvent(message: string): PresenceEvent {
  let e: Json;
  try {
    e = JSON.parse(message) as Json;
  } catch {
    throw new UnexpectedReplyError("event (not JSON)", message);
  }
  if (typeof e !== "object" || e === null) throw new UnexpectedReplyError("event", message);
  const shape = shapes[e.type as EventType] as ((e: Json) => boolean) | undefined;
  const ok =
    e.v === 1 &&
    typeof e.room === "string" &&
    typeof e.user === "string" &&
    isCount(e.at) &&
    isCount(e.seq) &&
    isCount(e.prev) &&
    Object.hasOwn(shapes, e.type as string) &&
    shape !== undefined &&
    shape(e);
  if (!ok) throw new UnexpectedReplyError("event", message);
  return e as unknown as PresenceEvent;
}
