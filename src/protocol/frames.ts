import { checkEvent, EVENT_TYPES, type EventType, type PresenceEvent } from "./events.js";
import type { Snapshot } from "./replica.js";
import type { MemberState } from "./state.js";
import type { UserStatus } from "./users.js";

/**
 * The WebSocket protocol between the gateway and its clients: JSON text frames, each an object
 * with a `type`. The version is the WebSocket subprotocol both sides ask for: version 1, or
 * version 2, which adds frames a version 1 client would not know (`events`, `count`, `watch`,
 * `users`).
 */
export const SUBPROTOCOL = "rollcall.v1";
export const SUBPROTOCOL_V2 = "rollcall.v2";
/** Every version a gateway serves, newest first, as it tells a client that offers none of them. */
export const SUBPROTOCOLS: readonly string[] = [SUBPROTOCOL_V2, SUBPROTOCOL];
/**
 * A browser cannot set headers on a WebSocket: the client offers its token as a second
 * subprotocol entry, `rollcall.bearer.<token>`, which the gateway reads and never selects. A
 * header stays out of the URL, and so out of proxies' and servers' access logs.
 */
export const BEARER_PROTOCOL = "rollcall.bearer.";

/** A client's request; `ref`, when given, comes back in the reply (ack, snapshot or error). */
export type ClientFrame =
  | {
      type: "join";
      room: string;
      state?: MemberState;
      types?: EventType[];
      /** Join unseen: in no roster, count, event or status; typing and state are refused. */
      invisible?: boolean;
      ref?: string;
    }
  | { type: "leave"; room: string; ref?: string }
  | { type: "typing"; room: string; ref?: string }
  | { type: "typing-stop"; room: string; ref?: string }
  | { type: "state"; room: string; state: MemberState; ref?: string }
  | { type: "heartbeat"; ref?: string }
  /** A fresh token for the same user, before the socket's expires: answered by `refreshed`. */
  | { type: "refresh"; token: string; ref?: string }
  /** v2: follow the room's member count (`count` frames) without joining it or hearing its events. */
  | { type: "watch"; room: string; ref?: string }
  | { type: "unwatch"; room: string; ref?: string }
  /** v2: follow these users' status (`users` frames), instead of any followed before. */
  | { type: "follow-users"; users: string[]; ref?: string }
  | { type: "unfollow-users"; ref?: string };

export type ClientFrameType = ClientFrame["type"];

export type FrameErrorCode =
  | "BAD_FRAME"
  | "UNKNOWN_FRAME"
  | "INVALID_ID"
  | "INVALID_STATE"
  | "INVALID_OPTION"
  | "FORBIDDEN"
  | "NOT_JOINED"
  | "TOO_MANY_ROOMS"
  | "TOO_MANY_SOCKETS"
  | "ROOM_FULL"
  | "RATE_LIMITED"
  | "INVALID_TOKEN"
  | "UNAVAILABLE"
  | "INTERNAL";

export type ServerFrame =
  /**
   * First frame on a socket: who the server says you are, how often to show you are alive, and
   * when the token expires (ms since the epoch; null: never): the socket closes then with 4001.
   */
  | {
      type: "welcome";
      user: string;
      connection: string;
      heartbeatMs: number;
      expiresAt: number | null;
    }
  /** A refresh was accepted: the socket now lives until the new token's expiry. */
  | { type: "refreshed"; expiresAt: number | null; ref?: string }
  /** The room's roster, consistent with its events at `roster.seq` (a join's reply, or a resync). */
  | { type: "snapshot"; room: string; roster: Snapshot; ref?: string }
  | { type: "event"; event: PresenceEvent }
  /** v2: a room's events in order, one chain (a large room's, coalesced). */
  | { type: "events"; room: string; events: PresenceEvent[] }
  /** v2: a watched room's member count (on `watch`, then when it changes, spaced out). */
  | { type: "count"; room: string; count: number; ref?: string }
  /**
   * v2: followed users' statuses. The answer to `follow-users` (with its `ref`, every followed
   * user in the order asked, and the users the gateway refused as `denied`), then the users
   * whose status changed since the last one, batched.
   */
  | { type: "users"; statuses: UserStatus[]; ref?: string; denied?: string[] }
  | { type: "ack"; ref: string }
  /** `room`: the room this error left, when it answers no request (after a refresh). */
  | { type: "error"; code: FrameErrorCode; message: string; ref?: string; room?: string };

/** A frame that breaks the protocol: the gateway answers it with an error frame of this code. */
export class FrameError extends Error {
  constructor(
    readonly code: FrameErrorCode,
    message: string,
    readonly ref?: string,
  ) {
    super(message);
    this.name = "FrameError";
  }
}

const FIELDS: Record<ClientFrameType, readonly string[]> = {
  join: ["type", "room", "state", "types", "invisible", "ref"],
  leave: ["type", "room", "ref"],
  typing: ["type", "room", "ref"],
  "typing-stop": ["type", "room", "ref"],
  state: ["type", "room", "state", "ref"],
  heartbeat: ["type", "ref"],
  refresh: ["type", "token", "ref"],
  watch: ["type", "room", "ref"],
  unwatch: ["type", "room", "ref"],
  "follow-users": ["type", "users", "ref"],
  "unfollow-users": ["type", "ref"],
};
/** Frames only version 2 has: a version 1 socket that sends one gets UNKNOWN_FRAME. */
const V2_ONLY: ReadonlySet<string> = new Set([
  "watch",
  "unwatch",
  "follow-users",
  "unfollow-users",
]);
const MAX_REF = 64;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads one client frame. Anything but a known frame with exactly its fields is refused: a frame
 * cannot carry a user (the server knows who sent it) or anything else the gateway would ignore.
 */
export function parseClientFrame(text: string, version: 1 | 2 = 2): ClientFrame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new FrameError("BAD_FRAME", "a frame must be JSON");
  }
  if (!isObject(value)) throw new FrameError("BAD_FRAME", "a frame must be a JSON object");
  const ref = value.ref;
  if (ref !== undefined && (typeof ref !== "string" || ref.length > MAX_REF)) {
    throw new FrameError("BAD_FRAME", `ref must be a string of at most ${MAX_REF} characters`);
  }
  const fail = (code: FrameErrorCode, message: string): never => {
    throw new FrameError(code, message, ref);
  };
  const type = value.type as ClientFrameType;
  if (
    typeof type !== "string" ||
    !Object.hasOwn(FIELDS, type) ||
    (version === 1 && V2_ONLY.has(type))
  ) {
    fail("UNKNOWN_FRAME", `unknown frame type ${JSON.stringify(value.type)}`);
  }
  const extra = Object.keys(value).filter((k) => !FIELDS[type].includes(k));
  if (extra.length > 0) fail("BAD_FRAME", `a ${type} frame has no field ${extra.join(", ")}`);
  if (type === "refresh" && (typeof value.token !== "string" || value.token === "")) {
    fail("BAD_FRAME", "a refresh frame needs a token");
  }
  if (FIELDS[type].includes("room") && typeof value.room !== "string") {
    fail("BAD_FRAME", `a ${type} frame needs a room`);
  }
  if (type === "state" && !isObject(value.state)) fail("BAD_FRAME", "a state frame needs a state");
  if (type === "join" && value.state !== undefined && !isObject(value.state)) {
    fail("BAD_FRAME", "state must be an object");
  }
  if (type === "join" && value.invisible !== undefined && typeof value.invisible !== "boolean") {
    fail("BAD_FRAME", "invisible must be a boolean");
  }
  if (type === "join" && value.types !== undefined) {
    const types = value.types;
    if (!Array.isArray(types) || !types.every((t) => EVENT_TYPES.includes(t as EventType))) {
      fail("INVALID_OPTION", `types must list event types among ${EVENT_TYPES.join(", ")}`);
    }
  }
  // How many, and which: the gateway's checks (a frame of too many is answered, not closed).
  if (type === "follow-users" && !Array.isArray(value.users)) {
    fail("INVALID_OPTION", "users must be an array of user ids");
  }
  return value as ClientFrame;
}

/**
 * Whether a frame's bytes may be a refresh frame, told without parsing them: one flat object of
 * at most as many members as a refresh has (`type`, `token`, `ref`), nothing nested in it. Only
 * such a frame is parsed past the frame limit (a refresh may be longer than any other frame), so
 * a huge state costs a scan that stops at its first nested brace, never a parse.
 */
export function mayBeRefresh(bytes: Uint8Array): boolean {
  return flatObject(bytes, FIELDS.refresh.length, 0);
}

/**
 * Whether a frame's bytes may be a follow-users frame (as long as its thousand ids need): one
 * object of at most its members, one array in it, nothing else nested (see mayBeRefresh).
 */
export function mayBeFollow(bytes: Uint8Array): boolean {
  return flatObject(bytes, FIELDS["follow-users"].length, 1);
}

/** One object of at most `members` members, holding at most `arrays` arrays and no object. */
function flatObject(bytes: Uint8Array, members: number, arrays: number): boolean {
  let inString = false;
  let colons = 0;
  let braces = 0;
  let brackets = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (inString) {
      // A backslash escapes the next byte (a quote among them); a quote ends the string. Bytes of
      // multi-byte UTF-8 characters are all above 0x7f: none is taken for either.
      if (byte === 0x5c) i++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x3a) {
      if (++colons > members) return false;
    } else if (byte === 0x7b) {
      if (++braces > 1) return false;
    } else if (byte === 0x5b) {
      if (++brackets > arrays) return false;
    }
  }
  return true;
}

/** Reads one server frame (the client's side); anything else is an error. */
export function parseServerFrame(text: string): ServerFrame {
  const value: unknown = JSON.parse(text);
  if (!isObject(value) || typeof value.type !== "string") {
    throw new SyntaxError("not a rollcall frame");
  }
  if (value.type === "event") checkEvent(value.event);
  else if (value.type === "events") {
    if (typeof value.room !== "string" || !Array.isArray(value.events)) {
      throw new SyntaxError("an events frame without its events");
    }
    for (const event of value.events) checkEvent(event);
  } else if (value.type === "count") {
    if (typeof value.room !== "string" || !Number.isSafeInteger(value.count)) {
      throw new SyntaxError("a count frame without a count");
    }
  } else if (value.type === "snapshot") {
    const roster = value.roster;
    if (!isObject(roster) || !Array.isArray(roster.members) || typeof roster.epoch !== "string") {
      throw new SyntaxError("a snapshot frame without a roster");
    }
  } else if (value.type === "users") {
    if (!Array.isArray(value.statuses) || !value.statuses.every(isStatus)) {
      throw new SyntaxError("a users frame without its statuses");
    }
    const denied = value.denied;
    if (denied !== undefined && !(Array.isArray(denied) && denied.every(isString))) {
      throw new SyntaxError("a users frame's denied must list user ids");
    }
  } else if (!["welcome", "refreshed", "ack", "error"].includes(value.type)) {
    throw new SyntaxError(`unknown frame type ${value.type}`);
  }
  return value as unknown as ServerFrame;
}

const isString = (value: unknown): value is string => typeof value === "string";
const isTime = (value: unknown) => value === null || Number.isSafeInteger(value);

function isStatus(value: unknown): value is UserStatus {
  return (
    isObject(value) &&
    isString(value.user) &&
    typeof value.online === "boolean" &&
    isTime(value.since) &&
    isTime(value.lastSeenAt)
  );
}
