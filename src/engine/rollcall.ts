import { randomBytes } from "node:crypto";
import { RedisCallError, SettingsMismatchError, UnexpectedReplyError } from "../protocol/errors.js";
import { checkId } from "../protocol/ids.js";
import { integer, knownKeys } from "../protocol/options.js";
import { encodeState, type MemberState } from "../protocol/state.js";
import {
  checkEvent,
  type EventId,
  type EventType,
  type PresenceEvent,
} from "../protocol/events.js";
import { subscriberConnection } from "./connections.js";
import { LogGroup, records } from "./eventLog.js";
import { Layout } from "./layout.js";
import { Metrics } from "./metrics.js";
import { collectStats, type BucketStats } from "./stats.js";
import { Scripts, type Arg, type Client, type Script } from "./script.js";
import { deployment } from "./scripts/deployment.js";
import { dueRooms, type DueRooms } from "./scripts/dueRooms.js";
import { heartbeat, type HeartbeatResult } from "./scripts/heartbeat.js";
import { leave, type LeaveResult } from "./scripts/leave.js";
import { roster, type Roster } from "./scripts/roster.js";
import { setState, type StateResult } from "./scripts/setState.js";
import { startTyping, type TypingResult } from "./scripts/startTyping.js";
import { stopTyping, type StopTypingResult } from "./scripts/stopTyping.js";
import { sweepRoom, type SweepCounts } from "./scripts/sweepRoom.js";
import {
  deploymentFields,
  differences,
  resolveSettings,
  type RollcallOptions,
  type Settings,
} from "./settings.js";

/** Members one sweepRoom call expires at most: it bounds the time Redis spends in one script. */
const SWEEP_BATCH = 16;

/**
 * Presence in Redis: who is in each room, who is typing, and an event for every change.
 * Every method is one script call (sweepRoom loops over a big room in batches).
 */
export class Rollcall {
  readonly settings: Settings;
  /** @internal Where everything lives in Redis: the engine's alone (tests look, too). */
  readonly layout: Layout;
  /** Where this instance and the runtime parts built on it record their metrics. */
  readonly metrics: Metrics;
  private readonly scripts: Scripts;
  /** ARGV[1..4] of every room script (lua/include/room.lua), written once. */
  private readonly shared: readonly string[];
  private checked: Promise<void> | undefined;
  /** Calls get ids `<process><counter>`: unique across processes without a random draw each. */
  private readonly callPrefix = randomBytes(6).toString("base64url");
  private calls = 0;

  constructor(
    /** @internal The application's client: only the engine runs commands on it. */
    readonly redis: Client,
    options?: RollcallOptions,
  ) {
    this.settings = resolveSettings(options);
    this.metrics = new Metrics(options?.meter);
    this.layout = new Layout(this.settings.prefix, this.settings.buckets);
    this.scripts = new Scripts(redis);
    const s = this.settings;
    this.shared = [
      String(s.presenceWindowMs),
      String(s.typingWindowMs),
      String(s.keyTtlMs),
      `${s.eventRosterLimit} ${s.logLength} ${s.leaveGraceMs} ${s.replayWindowMs}`,
    ];
  }

  /**
   * Checks this instance's settings against the deployment's, stored in Redis by its first
   * instance. Every call awaits it; call it at start-up to fail early. Rejects with
   * SETTINGS_MISMATCH for good, or with the outage that kept it from checking (then it retries).
   */
  ready(): Promise<void> {
    this.checked ??= this.checkDeployment().catch((error: unknown) => {
      if (!(error instanceof SettingsMismatchError)) this.checked = undefined;
      throw error;
    });
    return this.checked;
  }

  /** Refreshes a connection; the first live connection of a user publishes `join`. */
  async heartbeat(
    room: string,
    user: string,
    connection: string,
    options?: { state?: MemberState; capacity?: number },
  ): Promise<HeartbeatResult> {
    const { state, capacity } = knownKeys(options, ["state", "capacity"]);
    const result = await this.call(heartbeat, room, {
      user: checkId("user", user),
      connection: this.connection(connection),
      state: state === undefined ? "" : this.encode(state),
      capacity: capacity === undefined ? 0 : integer("capacity", capacity, 1, 1_000_000_000),
    });
    return this.published(result.joined ? "join" : "update", result);
  }

  /** The clean disconnect: removes a connection; the last one publishes `leave`. */
  async leave(room: string, user: string, connection: string): Promise<LeaveResult> {
    const result = await this.call(leave, room, {
      user: checkId("user", user),
      connection: this.connection(connection),
    });
    return this.published("leave", result);
  }

  async startTyping(room: string, user: string): Promise<TypingResult> {
    const result = await this.call(startTyping, room, { user: checkId("user", user) });
    return this.published("typing-start", result);
  }

  /** Clears the typing mark, e.g. when the user sends the message. */
  async stopTyping(room: string, user: string): Promise<StopTypingResult> {
    const result = await this.call(stopTyping, room, { user: checkId("user", user) });
    return this.published("typing-stop", result);
  }

  async setState(room: string, user: string, state: MemberState): Promise<StateResult> {
    const result = await this.call(setState, room, {
      user: checkId("user", user),
      state: this.encode(state),
    });
    return this.published("update", result);
  }

  /** The room's members and typists as one snapshot, consistent with the events at `seq`. */
  async roster(room: string): Promise<Roster> {
    return this.call(roster, room, { room, limit: this.settings.rosterLimit }, false);
  }

  /** Expires and announces everything due in one room now, `batch` members per script call. */
  async sweepRoom(
    room: string,
    options?: { batch?: number },
  ): Promise<SweepCounts & { calls: number }> {
    const { batch = SWEEP_BATCH } = knownKeys(options, ["batch"]);
    integer("batch", batch, 1, 10_000);
    const counts = { connections: 0, leaves: 0, typingStops: 0, calls: 0 };
    let more = true;
    while (more) {
      const swept = await this.call(sweepRoom, room, { batch });
      counts.connections += swept.connections;
      counts.leaves += swept.leaves;
      counts.typingStops += swept.typingStops;
      counts.calls += 1;
      more = swept.more;
    }
    this.metrics.add("rollcall.events", counts.leaves, { type: "leave" });
    this.metrics.add("rollcall.events", counts.typingStops, { type: "typing-stop" });
    return counts;
  }

  /** Rooms of a bucket with something due now (what a Sweeper settles), at most `limit`. */
  async dueRooms(bucket: number, limit: number): Promise<DueRooms> {
    integer("bucket", bucket, 0, this.settings.buckets - 1);
    integer("limit", limit, 1, 10_000);
    await this.ready();
    return this.scripts.run(dueRooms, [this.layout.due(bucket)], [], { limit });
  }

  /**
   * The room's events logged after the log entry `after` (the log must be on), reading at most
   * `limit` entries of its bucket's log: what a replica that saw a gap replays instead of taking a
   * snapshot. Entries the log no longer holds are simply missing, and the events' chain shows it.
   */
  async readLog(room: string, after: string, limit = 1_000): Promise<PresenceEvent[]> {
    const key = this.layout.log(this.layout.room(checkId("room", room)).bucket);
    let entries: [string, string[]][];
    try {
      entries = await this.redis.xrange(key, `(${after}`, "+", "COUNT", limit);
    } catch (error) {
      throw new RedisCallError("log read", error);
    }
    const events: PresenceEvent[] = [];
    for (const { id, json } of records(entries)) {
      const event = parseLogged(json);
      if (event.room === room) events.push({ ...event, log: id });
    }
    return events;
  }

  /** Every bucket's rooms, users, connections and typists, its sweep backlog and its events. */
  async stats(): Promise<BucketStats[]> {
    await this.ready();
    return collectStats(this.redis, this.layout, async (room) => {
      const r = await this.call(roster, room, { room, limit: 100_000 }, false);
      const connections = r.members.reduce((sum, m) => sum + m.connections, 0);
      return { users: r.count, connections, typing: r.typing.length };
    });
  }

  /** A consumer group's access to every bucket's log, on a connection of its own. */
  logGroup(group: string, consumer: string, onError: (error: RedisCallError) => void): LogGroup {
    return new LogGroup(this.redis, this.layout, group, consumer, onError);
  }

  /** @internal A connection of its own for a Subscriber's channels. */
  subscriberConnection(): Client {
    return subscriberConnection(this.redis);
  }

  /** The pub/sub channel of a room's events (sharded: it lives in the room's hash slot). */
  channel(room: string): string {
    return this.layout.room(checkId("room", room)).channel;
  }

  /** Runs a room script; one that changes something gets a replay key for its resends. */
  private async call<Input, Output>(
    script: Script<Input, Output>,
    room: string,
    input: Input,
    changes = true,
  ): Promise<Output> {
    const target = this.layout.room(checkId("room", room));
    await this.ready();
    const keys = changes
      ? [...target.keys, this.layout.replay(target.bucket, this.callId())]
      : [...target.keys];
    const started = performance.now();
    let outcome = "ok";
    try {
      return await this.scripts.run(script, keys, this.shared, input);
    } catch (error) {
      outcome = (error as { code?: string }).code ?? "error";
      throw error;
    } finally {
      const operation = script.name;
      this.metrics.add("rollcall.calls", 1, { operation, outcome });
      this.metrics.record("rollcall.call.duration", performance.now() - started, { operation });
    }
  }

  private published<T extends { event: EventId | null }>(type: EventType, result: T): T {
    if (result.event) this.metrics.add("rollcall.events", 1, { type });
    return result;
  }

  private async checkDeployment(): Promise<void> {
    const ours = deploymentFields(this.settings);
    const stored = await this.scripts.run(deployment, [this.layout.deployment], [], {
      fields: ours,
    });
    const found = stored.length === 0 ? [] : differences(stored, ours);
    if (found.length > 0) throw new SettingsMismatchError(found);
  }

  private callId(): string {
    this.calls += 1;
    return this.callPrefix + this.calls.toString(36);
  }

  private connection(connection: string): Arg {
    return this.layout.connection(checkId("connection", connection));
  }

  private encode(state: MemberState): string {
    return encodeState(state, this.settings.maxStateBytes);
  }
}

/** A logged event's JSON, checked like a published one. */
export function parseLogged(json: string | null): PresenceEvent {
  try {
    return checkEvent(JSON.parse(json ?? ""));
  } catch {
    throw new UnexpectedReplyError("log entry", json);
  }
}
