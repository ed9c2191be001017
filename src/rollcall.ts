import { UnexpectedReplyError } from "./errors.js";
import { checkId, Layout } from "./keys.js";
import { encodeState, type MemberState } from "./memberState.js";
import { settle, type RollcallOptions, type Settings } from "./options.js";
import { int, Scripts, str, type Client, type ScriptName } from "./scripts.js";

export interface HeartbeatResult {
  /** True when this heartbeat made the user present (a `join` was published). */
  joined: boolean;
  /** Sequence number of the event this call published, or 0 if it published none. */
  seq: number;
}

export interface LeaveResult {
  /** The connection was live and is now removed. */
  removed: boolean;
  /** It was the user's last live connection: a `leave` was published. */
  left: boolean;
  seq: number;
}

export interface TypingResult {
  /** Only present users can type; typing by anyone else changes nothing. */
  present: boolean;
  /** A `typing-start` was published (false when the mark was only refreshed). */
  started: boolean;
  seq: number;
}

export interface StateResult {
  present: boolean;
  /** The state differed and an `update` was published. */
  updated: boolean;
  seq: number;
}

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
  state: MemberState | null;
}

export interface Roster {
  room: string;
  /** Apply events whose `prev` is this number, then the later ones in order. */
  seq: number;
  /** All members of the room; `members` lists at most `rosterLimit` of them. */
  count: number;
  members: RosterMember[];
  /** Users typing, in member order. */
  typing: string[];
}

export interface SweepCounts {
  /** Connections dropped for silence. */
  connections: number;
  /** Users announced gone (`leave`, reason expired). */
  leaves: number;
  /** Typing indicators announced stopped. */
  typingStops: number;
}

const SWEEP_ROOM_BATCH = 100;

function parseState(json: string): MemberState {
  try {
    return JSON.parse(json) as MemberState;
  } catch {
    throw new UnexpectedReplyError("member state in a roster", json);
  }
}

/**
 * Presence in Redis: who is in each room, who is typing, and an event for every change.
 * Every method is one script call (sweepRoom loops over a room in batches).
 */
export class Rollcall {
  readonly settings: Settings;
  readonly layout: Layout;
  private readonly scripts: Scripts;

  constructor(
    readonly redis: Client,
    options: RollcallOptions = {},
  ) {
    this.settings = settle(options);
    this.layout = new Layout(this.settings);
    this.scripts = new Scripts(redis);
  }

  /** Refreshes a connection; the first live connection of a user publishes `join`. */
  async heartbeat(
    room: string,
    user: string,
    connection: string,
    options: { state?: MemberState } = {},
  ): Promise<HeartbeatResult> {
    const state = options?.state === undefined ? "" : this.encode(options.state);
    const reply = await this.call("heartbeat", room, [
      checkId("user", user),
      checkId("connection", connection),
      state,
    ]);
    return { joined: int(reply, 0) === 1, seq: int(reply, 1) };
  }

  /** The clean disconnect: removes a connection; the last one publishes `leave`. */
  async leave(room: string, user: string, connection: string): Promise<LeaveResult> {
    const reply = await this.call("leave", room, [
      checkId("user", user),
      checkId("connection", connection),
    ]);
    const outcome = int(reply, 0);
    return { removed: outcome > 0, left: outcome === 2, seq: int(reply, 1) };
  }

  async startTyping(room: string, user: string): Promise<TypingResult> {
    const reply = await this.call("startTyping", room, [checkId("user", user)]);
    const outcome = int(reply, 0);
    return { present: outcome > 0, started: outcome === 2, seq: int(reply, 1) };
  }

  /** Clears the typing indicator, e.g. when the user sends the message. */
  async stopTyping(room: string, user: string): Promise<{ stopped: boolean; seq: number }> {
    const reply = await this.call("stopTyping", room, [checkId("user", user)]);
    return { stopped: int(reply, 0) === 1, seq: int(reply, 1) };
  }

  async setState(room: string, user: string, state: MemberState): Promise<StateResult> {
    const reply = await this.call("setState", room, [checkId("user", user), this.encode(state)]);
    const outcome = int(reply, 0);
    return { present: outcome > 0, updated: outcome === 2, seq: int(reply, 1) };
  }

  /** The room's members and typists as one snapshot, consistent with the event stream at `seq`. */
  async roster(room: string): Promise<Roster> {
    const reply = await this.call("roster", room, [this.settings.rosterLimit]);
    const members: RosterMember[] = [];
    for (let i = 2; i < reply.length; i += 6) {
      const typedAt = int(reply, i + 4);
      const state = str(reply, i + 5);
      members.push({
        user: str(reply, i),
        connections: int(reply, i + 1),
        lastSeen: int(reply, i + 2),
        joinedAt: int(reply, i + 3),
        typedAt: typedAt === 0 ? null : typedAt,
        state: state === "" ? null : parseState(state),
      });
    }
    const typing = members.filter((m) => m.typedAt !== null).map((m) => m.user);
    return { room, seq: int(reply, 0), count: int(reply, 1), members, typing };
  }

  /** Expires and announces everything due in one room, now. */
  async sweepRoom(room: string): Promise<SweepCounts> {
    const counts: SweepCounts = { connections: 0, leaves: 0, typingStops: 0 };
    let cursor = "";
    do {
      const reply = await this.call("sweepRoom", room, [cursor, SWEEP_ROOM_BATCH]);
      cursor = str(reply, 0);
      counts.connections += int(reply, 1);
      counts.leaves += int(reply, 2);
      counts.typingStops += int(reply, 3);
    } while (cursor !== "");
    return counts;
  }

  /** The pub/sub channel of a room's events (sharded: it lives in the room's hash slot). */
  channel(room: string): string {
    return this.layout.channel(checkId("room", room));
  }

  /** Runs a bucket script with the deployment's settings. */
  runInBucket(
    name: ScriptName,
    bucket: number,
    args: readonly (string | number)[],
  ): Promise<unknown[]> {
    const { keys, channelPrefix } = this.layout.buckets[bucket]!;
    const s = this.settings;
    return this.scripts.run(name, keys, [
      s.presenceWindowMs,
      s.typingWindowMs,
      s.keyTtlMs,
      s.eventRosterLimit,
      channelPrefix,
      ...args,
    ]);
  }

  private call(name: ScriptName, room: string, args: (string | number)[]): Promise<unknown[]> {
    checkId("room", room);
    return this.runInBucket(name, this.layout.of(room).bucket, [room, ...args]);
  }

  private encode(state: MemberState): string {
    return encodeState(state, this.settings.maxStateBytes);
  }
}

export { Sweeper, type SweeperOptions, type PassStats } from "./sweeper.js";
export {
  Subscriber,
  type SubscriberOptions,
  type SubscribeOptions,
  type Subscription,
  type PresenceListener,
} from "./subscriber.js";
export {
  RoomWatch,
  type WatchedRoster,
  type WatchedMember,
  type RosterChange,
  type SyncReason,
} from "./watch.js";
export { parseEvent, EVENT_TYPES } from "./events.js";
export type * from "./events.js";
export * from "./errors.js";
export type { MemberState, JsonValue } from "./memberState.js";
export type { RollcallOptions } from "./options.js";
