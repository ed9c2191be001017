import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { RollcallError, SettingsMismatchError, UnexpectedReplyError } from "../protocol/errors.js";
import { RedisCallError } from "./errors.js";
import {
  checkEvent,
  type EventId,
  type EventType,
  type PresenceEvent,
} from "../protocol/events.js";
import { checkId } from "../protocol/ids.js";
import { integer, invalidOption, knownKeys } from "../protocol/options.js";
import { encodeState, type MemberState } from "../protocol/state.js";
import { subscriberConnection } from "./connections.js";
import { LogGroup, records } from "./eventLog.js";
import { memoryPolicies, policyWarning, type RollcallWarning } from "./memoryPolicy.js";
import { readMark, type RoomMark } from "./roomMark.js";
import { roomsOfBuckets } from "./roomScan.js";
import { KEPT, Layout, REPLAY_GENERATION } from "./layout.js";
import { Metrics } from "./metrics.js";
import { Scripts, type Arg, type Client, type Script } from "./script.js";
import { count, type Counts } from "./scripts/count.js";
import { storedSettings } from "./deployment.js";
import { deployment } from "./scripts/deployment.js";
import {
  heartbeat,
  type HeartbeatBatch,
  type HeartbeatEntry,
  type HeartbeatFailure,
  type HeartbeatResult,
} from "./scripts/heartbeat.js";
import { leave, type LeaveResult } from "./scripts/leave.js";
import { reconcile } from "./scripts/reconcile.js";
import { readPages, roster, type Roster } from "./scripts/roster.js";
import { RosterPlanner, rosterCursor } from "./rosterPlan.js";
import { setState, type StateResult } from "./scripts/setState.js";
import { startTyping, type TypingResult } from "./scripts/startTyping.js";
import { stats, type BucketStats } from "./scripts/stats.js";
import { stopTyping, type StopTypingResult } from "./scripts/stopTyping.js";
import { sweep, type SweepCounts, type SweepReply } from "./scripts/sweep.js";
import { users } from "./scripts/users.js";
import {
  readSnapshot,
  readStatuses,
  STATUS_LIMIT,
  UserChangeDrain,
  type StatusSnapshot,
} from "./users.js";
import type { UserStatus } from "../protocol/users.js";
import {
  deploymentFields,
  differences,
  resolveSettings,
  type RollcallOptions,
  type Settings,
  packSettings,
} from "./settings.js";

// Named once: a heartbeat checks its options against them at every call.
const HEARTBEAT_OPTIONS = ["state", "capacity", "invisible"] as const;
const HEARTBEAT_KEYS = ["room", "user", "connection", ...HEARTBEAT_OPTIONS] as const;

/** Members one sweep call expires at most: it bounds the time Redis spends in one script. */
const SWEEP_BATCH = 16;
/** Rooms one sweep of a bucket visits at most. */
const SWEEP_ROOMS = 64;
/** Entries one heartbeat call refreshes at most: steady ones cost about a microsecond each. */
export const HEARTBEAT_BATCH = 128;
/** Rooms one reconcile call counts at most. */
const RECONCILE_ROOMS = 256;

/** One heartbeat call of a heartbeatMany: a bucket's entries (HEARTBEAT_BATCH at most). */
interface HeartbeatCall {
  readonly bucket: number;
  readonly batch: HeartbeatBatch;
  /** Its number in this instance's replay strings (lua/include/replay.lua). */
  readonly number: number;
  /** Until when a resend finds the replies its run kept (its first send + replayWindowMs). */
  readonly until: number;
}

/** A heartbeat call that failed, kept for a resend. */
interface FailedCall extends HeartbeatCall {
  /** Its entries (entryId), in the order the script takes them. */
  readonly ids: readonly string[];
}

/** A call to make, and where each of its entries came in the list given, in its order. */
interface Send {
  readonly call: HeartbeatCall;
  readonly at: readonly number[];
}

/** One connection to refresh in a room, as heartbeatMany takes it. */
export interface Heartbeat {
  room: string;
  user: string;
  connection: string;
  /** A new state for the user in the room (published as `update` when it differs). */
  state?: MemberState;
  /** Most members the room may hold: a user not present cannot join a full room. */
  capacity?: number;
  /**
   * The connection is invisible: its user appears in no roster, count, event or status of the
   * room on its account (a user with a visible connection in the room is present all the same).
   * A connection keeps the visibility it first beat with, until it leaves.
   */
  invisible?: boolean;
}

/**
 * What heartbeatMany gives for each entry: the heartbeat's result, or the failure of its
 * bucket's call. `error` tells them apart: `if (outcome.error) … else outcome.joined`.
 */
export type HeartbeatOutcome =
  (HeartbeatResult & { readonly error?: undefined }) | HeartbeatFailure;

export interface RollcallEvents {
  /**
   * The deployment's Redis runs rollcall, but not safely: an evicting maxmemory-policy (or one
   * that could not be read), found by ready(). With no listener, process.emitWarning tells it.
   */
  warning: [warning: RollcallWarning];
}

/**
 * Presence in Redis: who is in each room, who is typing, and an event for every change.
 * Every method is one script call, except where it says otherwise.
 */
export class Rollcall extends EventEmitter<RollcallEvents> {
  readonly settings: Settings;
  /** @internal Where everything lives in Redis: the engine's alone (tests look, too). */
  readonly layout: Layout;
  /** Where this instance and the runtime parts built on it record their metrics. */
  readonly metrics: Metrics;
  private readonly scripts: Scripts;
  /** ARGV[1] of every bucket script (lua/include/bucket.lua), packed once. */
  private readonly shared: readonly Arg[];
  /** How roster() reads each room's pages, from what its last page showed. */
  private readonly rosters: RosterPlanner;
  private checked: Promise<void> | undefined;
  /** What a read checked against the stored settings, when none were stored yet (see ready). */
  private readable: Promise<void> | undefined;
  /** Names this instance's calls in the replay strings: unique across processes. */
  private readonly instance = randomBytes(6).toString("base64url");
  private readonly replayKeys: { generation: number; key: string }[] = [];
  /** Rooms' member counts and shards as their last roster page gave them: how the next is best
   * read. */
  private calls = 0;
  /** Heartbeat calls that failed, by each of their entries, until a batch resends them. */
  private readonly failed = new Map<string, FailedCall>();
  /** Applies the user changes of joins and leaves to the users' status (see applyUserChanges). */
  private readonly userChanges: UserChangeDrain;
  /** ready() has resolved: calls go on without awaiting it. */
  private deploymentChecked = false;

  constructor(
    /** @internal The application's client: only the engine runs commands on it. */
    readonly redis: Client,
    options?: RollcallOptions,
  ) {
    super();
    this.settings = resolveSettings(options);
    this.metrics = new Metrics(options?.meter);
    this.layout = new Layout(this.settings.prefix, this.settings.buckets);
    this.scripts = new Scripts(redis);
    this.rosters = new RosterPlanner(this.layout, this.settings.rosterLimit);
    this.shared = [packSettings(this.settings)];
    this.userChanges = new UserChangeDrain(redis, this.layout, async (bucket, changes) => {
      const { retentionMs } = this;
      const made = await this.run(users, bucket, { kind: "write" }, [], { retentionMs, changes });
      return made.online + made.offline;
    });
  }

  /** How long a user's last-seen time is kept after they went offline. */
  private get retentionMs(): number {
    return this.settings.userRetentionMs;
  }

  /**
   * Checks this instance's settings against the deployment's, stored in Redis by its first
   * instance. Every call awaits it; call it at start-up to fail early. Rejects with
   * SETTINGS_MISMATCH for good, or with the outage that kept it from checking (then it retries).
   * Then reads every master's maxmemory-policy: any but noeviction is a `warning` event (the
   * check goes on; nothing fails).
   */
  ready(): Promise<void> {
    this.checked ??= this.checkDeployment()
      .then(() => this.checkMemoryPolicy())
      .then(() => {
        this.deploymentChecked = true;
      })
      .catch((error: unknown) => {
        if (!(error instanceof SettingsMismatchError)) this.checked = undefined;
        throw error;
      });
    return this.checked;
  }

  /**
   * What a read awaits instead of ready(): the same check, but a read stores nothing. Settings
   * already stored are compared (and then this instance is ready); none stored lets reads go on,
   * and the first call that changes something stores them.
   */
  private readyToRead(): Promise<void> {
    if (this.checked) return this.checked;
    this.readable ??= storedSettings(this.redis, this.settings.prefix).then(
      (stored) => {
        if (stored.length > 0) return this.ready();
      },
      (error: unknown) => {
        this.readable = undefined;
        throw error;
      },
    );
    return this.readable;
  }

  /**
   * Refreshes a connection; the first live connection of a user publishes `join`. Rejects when
   * its call fails (a retry answers what a run whose reply was lost did, as in heartbeatMany).
   */
  async heartbeat(
    room: string,
    user: string,
    connection: string,
    options?: { state?: MemberState; capacity?: number; invisible?: boolean },
  ): Promise<HeartbeatResult> {
    const { state, capacity, invisible } = knownKeys(options, HEARTBEAT_OPTIONS);
    const asked: Heartbeat = { room, user, connection, state, capacity, invisible };
    const entry = this.entry(asked);
    // While no call waits for a resend, the entry goes straight into a call of its own: what
    // heartbeatMany would send for it, without a batch's grouping.
    const outcomes =
      this.failed.size > 0
        ? await this.heartbeatMany([asked])
        : await this.send(
            {
              call: this.heartbeatCall(
                this.layout.room(room).bucket,
                [{ room: storedRoom(asked), entries: [entry] }],
                1,
              ),
              at: [0],
            },
            [asked],
            [entry],
          );
    const outcome = outcomes[0]!;
    if (outcome.error) throw outcome.error;
    if (outcome.joined) this.drainUserChanges(this.layout.room(room).bucket);
    return outcome;
  }

  /**
   * Refreshes many connections at once, in one script call per bucket (per HEARTBEAT_BATCH of
   * them): what a server holding many sockets sends each interval. Every entry is what
   * heartbeat() would do alone, and its outcome says so, in the order given: its result, or
   * `{ error }` when its bucket's call failed (the other buckets' entries were applied all the
   * same). Bad input rejects, and nothing is sent. Entries are applied room by room, rooms in
   * the order they first come, and a room's in the order given.
   *
   * A failed call may have run, its reply lost. Within replayWindowMs, a batch that holds all
   * of its entries again (the same room, user, connection, state and capacity: a retry of
   * them) resends it as it was, and an entry it did apply answers its first run's result (a
   * join: `joined`, and the event's seq), not a second run's.
   */
  async heartbeatMany(heartbeats: readonly Heartbeat[]): Promise<HeartbeatOutcome[]> {
    const list: unknown = heartbeats;
    if (!Array.isArray(list)) invalidOption("heartbeatMany takes an array");
    // Checked first, all of them: a bad entry sends nothing.
    const entries = heartbeats.map((h) => this.entry(h));
    const id = (at: number) => entryId(heartbeats[at]!, entries[at]!);
    // Entries are named only while a failed call waits: a steady batch pays nothing for it.
    const resends = this.failed.size > 0 ? this.resends(heartbeats.map((_, at) => id(at))) : [];
    const taken = new Set(resends.flatMap((send) => send.at));
    const sends = [...resends, ...this.heartbeatCalls(heartbeats, entries, taken)];
    // Started in this order, so a resend reaches Redis before the new calls of its bucket.
    const parts =
      sends.length === 1
        ? [await this.send(sends[0]!, heartbeats, entries)]
        : await Promise.all(sends.map((send) => this.send(send, heartbeats, entries)));
    // Each call's outcomes come in its order (room by room): back to the order given.
    const outcomes = new Array<HeartbeatOutcome>(heartbeats.length);
    parts.forEach((part, k) => sends[k]!.at.forEach((a, i) => (outcomes[a] = part[i]!)));
    sends.forEach(({ call }, k) => {
      if (parts[k]!.some((outcome) => !outcome.error && outcome.joined)) {
        this.drainUserChanges(call.bucket);
      }
    });
    return outcomes;
  }

  /**
   * One heartbeat call: the outcomes of its entries in its order (heartbeats[at[i]], whose
   * checked entries are entries[at[i]]), each a result or its call's failure, kept for a resend.
   */
  private async send(
    { call, at }: Send,
    heartbeats: readonly Heartbeat[],
    entries: readonly HeartbeatEntry[],
  ): Promise<HeartbeatOutcome[]> {
    let outcomes: HeartbeatOutcome[];
    try {
      outcomes = await this.run(
        heartbeat,
        call.bucket,
        { kind: "change", number: call.number },
        [],
        call.batch,
      );
    } catch (error) {
      const failure =
        error instanceof RollcallError ? error : new RedisCallError("heartbeat", error);
      this.keepFailed({ ...call, ids: at.map((a) => entryId(heartbeats[a]!, entries[a]!)) });
      return at.map(() => ({ error: failure }));
    }
    for (const outcome of outcomes) {
      if (outcome.error || !outcome.event) continue;
      this.metrics.add("rollcall.events", 1, { type: outcome.joined ? "join" : "update" });
    }
    return outcomes;
  }

  /**
   * The failed calls that these entries (entryId) all ask for again: each to be sent again as
   * it was. A failed call some of whose entries come without the others is forgotten: they go
   * in new calls (a resend would apply entries no longer asked for).
   */
  private resends(ids: readonly string[]): Send[] {
    const now = performance.now();
    for (const [id, call] of this.failed) {
      if (call.until > now) break; // kept in the order they failed
      this.failed.delete(id);
    }
    const waiting = new Map<string, number[]>();
    ids.forEach((id, at) => waiting.set(id, [...(waiting.get(id) ?? []), at]));
    const sends: Send[] = [];
    for (const id of new Set(ids)) {
      const call = this.failed.get(id);
      if (!call) continue;
      for (const one of call.ids) this.failed.delete(one);
      const asked = (one: string) => call.ids.filter((other) => other === one).length;
      if (call.ids.every((one) => (waiting.get(one)?.length ?? 0) >= asked(one))) {
        sends.push({ call, at: call.ids.map((one) => waiting.get(one)!.shift()!) });
      }
    }
    return sends;
  }

  /** The entries not `taken`, in new calls: each bucket's, HEARTBEAT_BATCH at most per call. */
  private heartbeatCalls(
    heartbeats: readonly Heartbeat[],
    entries: readonly HeartbeatEntry[],
    taken: ReadonlySet<number>,
  ): Send[] {
    type Group = { room: string; entries: HeartbeatEntry[]; at: number[]; users: Set<string> };
    type Open = { rooms: Group[]; size: number };
    const open = new Map<number, Open[]>();
    heartbeats.forEach((h, at) => {
      if (taken.has(at)) return;
      const { bucket } = this.layout.room(h.room);
      const room = storedRoom(h);
      const list = open.get(bucket) ?? [];
      open.set(bucket, list);
      let chunk = list.at(-1);
      if (!chunk || chunk.size === HEARTBEAT_BATCH) list.push((chunk = { rooms: [], size: 0 }));
      // The room's last group, unless it holds the user already (HeartbeatBatch): then a new
      // one right after it, so that a room's entries still go together, in the order given.
      const { user } = entries[at]!;
      const last = chunk.rooms.findLastIndex((g) => g.room === room);
      let group = chunk.rooms[last];
      if (!group || group.users.has(user)) {
        group = { room, entries: [], at: [], users: new Set() };
        chunk.rooms.splice(last === -1 ? chunk.rooms.length : last + 1, 0, group);
      }
      group.users.add(user);
      group.entries.push(entries[at]!);
      group.at.push(at);
      chunk.size += 1;
    });
    return [...open].flatMap(([bucket, list]) =>
      list.map(({ rooms, size }) => ({
        call: this.heartbeatCall(bucket, rooms, size),
        at: rooms.flatMap((g) => g.at),
      })),
    );
  }

  /** A new heartbeat call of a bucket's rooms, numbered. */
  private heartbeatCall(
    bucket: number,
    rooms: HeartbeatBatch["rooms"],
    size: number,
  ): HeartbeatCall {
    const until = performance.now() + this.settings.replayWindowMs;
    return { bucket, batch: { rooms, size }, number: this.calls++, until };
  }

  /** Keeps a failed call for a resend (while its replies may be kept: see resends). */
  private keepFailed(call: FailedCall): void {
    if (this.failed.size >= KEPT) this.failed.clear();
    for (const id of call.ids) this.failed.set(id, call);
  }

  /** The clean disconnect: removes a connection; the last one publishes `leave`. */
  async leave(room: string, user: string, connection: string): Promise<LeaveResult> {
    const result = await this.call(leave, room, {
      user: checkId("user", user),
      connection: this.connection(connection),
    });
    if (result.left) this.drainUserChanges(this.layout.room(room).bucket);
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

  /**
   * The room's members and typists, consistent with the events at `seq`: the whole room when it
   * holds at most `rosterLimit` members, else its first page, and the next with `cursor`. Redis
   * copies the records as stored; they are decoded here.
   */
  async roster(room: string, options?: { cursor?: string }): Promise<Roster> {
    const { cursor = "" } = knownKeys(options, ["cursor"]);
    const checked = rosterCursor(cursor);
    const { rosterLimit: limit, leaveGraceMs } = this.settings;
    const [key] = this.layout.room(checkId("room", room)).keys;
    // A room resharded between the plan and the read is read again as it now is.
    for (let attempt = 1; ; attempt++) {
      const read = this.rosters.plan(room, checked);
      const page = await this.read(roster, room, { room, key, limit, cursor, read, leaveGraceMs });
      this.rosters.learn(room, read, page);
      if (!("reshaped" in page)) return page;
      if (attempt === 3) {
        throw new RedisCallError("roster", new Error("the room was resharded on every read"));
      }
    }
  }

  /**
   * Every page of the room's roster, one call each (one page for a room of at most rosterLimit
   * members), no member on two of them, all of one epoch; pages of one seq list `count` members
   * (see readPages). Pages of several seqs are each consistent with their own: a Replica
   * assembles them with the events between them (installPages).
   */
  async rosterPages(room: string): Promise<Roster[]> {
    return readPages((cursor) => this.roster(room, { cursor }));
  }

  /** The room's members, connections and typists, as counted by the calls that change them. */
  async count(room: string): Promise<Counts> {
    return this.read(count, room, {}, 1);
  }

  /** Every bucket's rooms, users, connections and typists, its sweep backlog and its events. */
  async stats(): Promise<BucketStats[]> {
    return Promise.all(
      Array.from({ length: this.settings.buckets }, (_, bucket) =>
        this.run(stats, bucket, { kind: "read", keys: 2 }, [], { bucket }),
      ),
    );
  }

  /**
   * Counts every bucket's rooms anew and makes those the bucket's counts: after keys expired
   * unannounced (no sweeper ran for a key TTL), were evicted, or data was lost. The rooms are
   * found by a SCAN of their keys on every master, not from an index that may have gone with
   * them, and a room missing from its bucket's due index is put back in it (due now), so that a
   * sweep announces what expired. Exact while calls go on; each script call counts at most
   * RECONCILE_ROOMS rooms. Resolves to the buckets it reconciled (a bucket whose reconcile
   * another started meanwhile is left to that one).
   */
  async reconcile(): Promise<number> {
    const step = (bucket: number, generation: number, rooms: string[], finish = false) =>
      this.run(reconcile, bucket, { kind: "write", keys: 2 }, [], { generation, rooms, finish });
    const buckets = Array.from({ length: this.settings.buckets }, (_, bucket) => bucket);
    // Started first: a room made after its bucket's start is counted by the calls that make it.
    const generations = await Promise.all(
      buckets.map(async (b) => (await step(b, 0, [])).generation),
    );
    const superseded = new Set<number>();
    await roomsOfBuckets(this.redis, this.layout, async (bucket, rooms) => {
      for (let i = 0; i < rooms.length && !superseded.has(bucket); i += RECONCILE_ROOMS) {
        const batch = rooms.slice(i, i + RECONCILE_ROOMS);
        if ((await step(bucket, generations[bucket]!, batch)).superseded) superseded.add(bucket);
      }
    });
    const ends = buckets.map(async (b) =>
      superseded.has(b) || (await step(b, generations[b]!, [], true)).superseded ? 0 : 1,
    );
    return (await Promise.all(ends)).reduce<number>((a, b) => a + b, 0);
  }

  /**
   * @internal Where a room stands in Redis, read without its members (one MULTI of O(1) reads):
   * its epoch, the seq of its last event, its count, and the records it holds. What a RoomWatch
   * checks its replica against.
   */
  async mark(room: string): Promise<RoomMark> {
    const { keys } = this.layout.room(checkId("room", room));
    await this.readyToRead();
    let shards = this.rosters.shards(room);
    for (let attempt = 1; ; attempt++) {
      const shardKeys = Array.from({ length: shards }, (_, k) => this.layout.shard(room, k));
      const found = await readMark(this.redis, { room: keys[0], seq: keys[3], shards: shardKeys });
      if (!("reshaped" in found)) return found;
      if (attempt === 3) {
        throw new RedisCallError("mark", new Error("the room was resharded on every read"));
      }
      shards = found.shards;
    }
  }

  /** Expires and announces everything due in one room now, `batch` members per script call. */
  async sweepRoom(
    room: string,
    options?: { batch?: number },
  ): Promise<SweepCounts & { calls: number }> {
    const { batch = SWEEP_BATCH } = knownKeys(options, ["batch"]);
    integer("batch", batch, 1, 10_000);
    const counts = { connections: 0, leaves: 0, typingStops: 0, calls: 0 };
    let swept: SweepReply;
    do {
      swept = await this.call(sweep, room, { batch, rooms: 1 });
      addCounts(counts, swept);
      counts.calls += 1;
      if (swept.failure !== null) throw new RedisCallError("sweepRoom", new Error(swept.failure));
    } while (swept.more);
    this.metrics.add("rollcall.events", counts.leaves, { type: "leave" });
    this.metrics.add("rollcall.events", counts.typingStops, { type: "typing-stop" });
    return counts;
  }

  /**
   * One sweep of a bucket: the rooms due now, the longest overdue first, at most `rooms` of them
   * and `batch` members expired. `more` says whether more is due than this call settled.
   * `everyMs`: how long the caller pauses between passes (a Sweeper's interval), so that only a
   * gap between sweeps longer than three such pauses is taken for a stall of Redis.
   */
  async sweepBucket(
    bucket: number,
    options?: { batch?: number; rooms?: number; everyMs?: number },
  ): Promise<SweepReply> {
    const {
      batch = SWEEP_BATCH,
      rooms = SWEEP_ROOMS,
      everyMs = 0,
    } = knownKeys(options, ["batch", "rooms", "everyMs"]);
    integer("bucket", bucket, 0, this.settings.buckets - 1);
    integer("batch", batch, 1, 10_000);
    integer("rooms", rooms, 1, 10_000);
    integer("everyMs", everyMs, 0, 86_400_000);
    const input = { batch, rooms, everyMs };
    const swept = await this.run(sweep, bucket, { kind: "change" }, [""], input);
    if (swept.leaves > 0) this.drainUserChanges(bucket);
    this.metrics.add("rollcall.events", swept.leaves, { type: "leave" });
    this.metrics.add("rollcall.events", swept.typingStops, { type: "typing-stop" });
    return swept;
  }

  /**
   * Whether each user is online anywhere in the deployment, since when, and when last seen, in
   * the order given (at most STATUS_LIMIT users): plain reads of each user's status, one MGET
   * (one per bucket on a Cluster). A status follows the visible joins and leaves of rooms (a
   * leave grace included: a reload within it changes nothing), applied right after the calls
   * that make them, and by every Sweeper pass after a crash in between.
   */
  async status(users: readonly string[]): Promise<UserStatus[]> {
    const list: unknown = users;
    if (!Array.isArray(list)) invalidOption("status takes an array of user ids");
    if (users.length > STATUS_LIMIT) {
      invalidOption(`status takes at most ${STATUS_LIMIT} users, got ${users.length}`);
    }
    for (const user of users) checkId("user", user);
    this.needUserStatus("status");
    if (users.length === 0) return [];
    await this.readyToRead();
    return readStatuses(this.redis, this.layout, users);
  }

  /** Refuses a read of users' status where the deployment keeps none (userStatus off). */
  private needUserStatus(what: string): void {
    if (!this.settings.userStatus) {
      invalidOption(
        `${what} needs the option userStatus: true (this deployment keeps no users' status)`,
      );
    }
  }

  /**
   * @internal The statuses of users of one bucket with where its users channel stood: what a
   * follower of the channel applies later transitions to.
   */
  async statusSnapshot(bucket: number, users: readonly string[]): Promise<StatusSnapshot> {
    this.needUserStatus("watchUsers");
    await this.readyToRead();
    return readSnapshot(this.redis, this.layout, bucket, users);
  }

  /**
   * Applies a bucket's pending user changes (its rooms' visible joins and leaves) to the status
   * of their users; resolves to the online and offline transitions they made. Calls that join or
   * leave start it themselves; a Sweeper runs it for every bucket on each pass, so that changes
   * left behind by a process that died in between are applied too. Any number of instances may
   * run it at once: each change is applied once.
   */
  applyUserChanges(bucket: number): Promise<number> {
    integer("bucket", bucket, 0, this.settings.buckets - 1);
    // Without userStatus, no call writes a user change: there is nothing to apply.
    if (!this.settings.userStatus) return Promise.resolve(0);
    return this.userChanges.drain(bucket);
  }

  /** The bucket a user's status lives in: its transitions go on that bucket's users channel. */
  userBucket(user: string): number {
    return this.layout.userBucket(checkId("user", user));
  }

  /** @internal The pub/sub channel of a bucket's users' online and offline transitions. */
  usersChannel(bucket: number): string {
    return this.layout.usersChannel(bucket);
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

  /** A consumer group's access to every bucket's log, on a connection of its own. */
  logGroup(group: string, consumer: string, onError: (error: RedisCallError) => void): LogGroup {
    return new LogGroup(this.redis, this.layout, group, consumer, onError);
  }

  /**
   * @internal The key that signs what a bucket's scripts publish on its rooms' channels, with the
   * epoch it belongs to (each epoch makes its own inside Redis: lua/include/events.lua), or null
   * before the bucket's first event.
   */
  async channelKeyOf(bucket: number): Promise<{ epoch: string; key: string } | null> {
    let stored: (string | null)[];
    try {
      stored = await this.redis.hmget(this.layout.seq(bucket), "epoch", "mk");
    } catch (error) {
      throw new RedisCallError("channel key", error);
    }
    const [epoch, key] = stored;
    return epoch && key ? { epoch, key } : null;
  }

  /** @internal A connection of its own for a Subscriber's channels. */
  subscriberConnection(): Client {
    return subscriberConnection(this.redis);
  }

  /**
   * The bucket a room lives in (0 to buckets − 1): rooms of one bucket share a hash slot, and are
   * refreshed (heartbeatMany), swept and counted together.
   */
  bucketOf(room: string): number {
    return this.layout.room(checkId("room", room)).bucket;
  }

  /** The pub/sub channel of a room's events (sharded: it lives in the room's hash slot). */
  channel(room: string): string {
    return this.layout.room(checkId("room", room)).channel;
  }

  /** Runs a script of one room that changes it: it gets a replay entry for its resends. */
  private call<Input, Output>(
    script: Script<Input, Output>,
    room: string,
    input: Input,
  ): Promise<Output> {
    const { bucket } = this.layout.room(checkId("room", room));
    return this.run(script, bucket, { kind: "change" }, [room], input);
  }

  /** Runs a script of one room that changes nothing (it takes the first `keys` bucket keys). */
  private read<Input, Output>(
    script: Script<Input, Output>,
    room: string,
    input: Input,
    keys = 3,
  ): Promise<Output> {
    const { bucket } = this.layout.room(checkId("room", room));
    return this.run(script, bucket, { kind: "read", keys }, [room], input);
  }

  /**
   * Runs a script of a bucket (lua/include/bucket.lua): its keys, the shared arguments, then
   * `before` (the room) and the script's own. A change (a transition) gets the call's number
   * (the next, or `number`: a resend's), and the key where its replies are kept for resends; a
   * read writes nothing, the deployment's settings included; a write (a counts reconcile) is
   * neither.
   */
  private async run<Input, Output>(
    script: Script<Input, Output>,
    bucket: number,
    {
      kind,
      keys = 3,
      number,
    }: { kind: "change" | "write" | "read"; keys?: number; number?: number },
    before: readonly Arg[],
    input: Input,
  ): Promise<Output> {
    // Once the deployment was checked, a call awaits nothing before it is sent.
    if (!this.deploymentChecked) await (kind === "read" ? this.readyToRead() : this.ready());
    const bucketKeys = this.layout.bucketKeys(bucket).slice(0, keys);
    let call = "";
    if (kind === "change") {
      const n = number ?? this.calls++;
      const generation = Math.floor(n / REPLAY_GENERATION);
      bucketKeys.push(this.replayKey(bucket, generation));
      call = String(n % REPLAY_GENERATION);
    }
    const args = [...this.shared, call, ...before];
    // Awaited: an async function returning a promise settles two ticks later than one awaiting it.
    if (!this.metrics.on) return await this.scripts.run(script, bucketKeys, args, input);
    const started = performance.now();
    let outcome = "ok";
    try {
      return await this.scripts.run(script, bucketKeys, args, input);
    } catch (error) {
      outcome = (error as { code?: string }).code ?? "error";
      throw error;
    } finally {
      const operation = script.name;
      this.metrics.add("rollcall.calls", 1, { operation, outcome });
      this.metrics.record("rollcall.call.duration", performance.now() - started, { operation });
    }
  }

  /** The bucket's replay string of this instance's current generation, made once per generation. */
  private replayKey(bucket: number, generation: number): string {
    const known = this.replayKeys[bucket];
    if (known?.generation === generation) return known.key;
    const key = this.layout.replay(bucket, this.instance, generation);
    this.replayKeys[bucket] = { generation, key };
    return key;
  }

  /** A heartbeat as the script takes it, checked. */
  private entry(h: Heartbeat): HeartbeatEntry {
    const { room, user, connection, state, capacity, invisible } = knownKeys(h, HEARTBEAT_KEYS);
    checkId("room", room);
    if (invisible !== undefined && typeof invisible !== "boolean") {
      invalidOption(`invisible must be a boolean, got ${typeof invisible}`);
    }
    const encoded = state === undefined ? "" : this.encode(state);
    const limit = capacity === undefined ? 0 : integer("capacity", capacity, 1, 1_000_000_000);
    return {
      user: checkId("user", user),
      connection: this.connection(connection),
      options: encoded === "" && limit === 0 ? "" : `${limit}:${encoded}`,
    };
  }

  /**
   * Applies the bucket's user changes in the background: a failure leaves them in Redis for the
   * next drain (a Sweeper's pass, at the latest), and is not the caller's to handle.
   */
  private drainUserChanges(bucket: number): void {
    if (!this.settings.userStatus) return;
    this.userChanges.drain(bucket).catch(() => {});
  }

  private published<T extends { event: EventId | null }>(type: EventType, result: T): T {
    if (result.event) this.metrics.add("rollcall.events", 1, { type });
    return result;
  }

  /** Every master's maxmemory-policy: a warning when it may evict (or cannot be read). */
  private async checkMemoryPolicy(): Promise<void> {
    const warning = policyWarning(await memoryPolicies(this.redis));
    if (!warning) return;
    if (this.listenerCount("warning") === 0) return process.emitWarning(warning);
    try {
      this.emit("warning", warning);
    } catch (thrown) {
      process.emitWarning(thrown instanceof Error ? thrown : new Error(String(thrown)));
    }
  }

  private async checkDeployment(): Promise<void> {
    const ours = deploymentFields(this.settings);
    const stored = await this.scripts.run(deployment, [this.layout.deployment], [], {
      fields: ours,
    });
    const found = stored.length === 0 ? [] : differences(stored, ours);
    if (found.length > 0) throw new SettingsMismatchError(found);
  }

  private connection(connection: string): Arg {
    return this.layout.connection(checkId("connection", connection));
  }

  private encode(state: MemberState): string {
    return encodeState(state, this.settings.maxStateBytes);
  }
}

/** A heartbeat entry's identity, all that a call sends of it: what a resend must find again. */
function entryId(h: Heartbeat, { options }: HeartbeatEntry): string {
  return JSON.stringify([storedRoom(h), h.user, h.connection, options]);
}

/**
 * The room as the heartbeat script names it: an invisible connection's goes to the room's
 * hidden room, its name after byte 1 (no room id holds a control character), in the same
 * bucket, which publishes and counts nothing (lua/include/events.lua).
 */
function storedRoom({ room, invisible }: Heartbeat): string {
  return invisible === true ? `\u0001${room}` : room;
}

function addCounts(to: SweepCounts, from: SweepCounts): void {
  to.connections += from.connections;
  to.leaves += from.leaves;
  to.typingStops += from.typingStops;
}

/** A logged event's JSON, checked like a published one. */
export function parseLogged(json: string | null): PresenceEvent {
  try {
    return checkEvent(JSON.parse(json ?? ""));
  } catch {
    throw new UnexpectedReplyError("log entry", json);
  }
}
