import { EventEmitter } from "node:events";
import type { StatusSnapshot } from "../engine/users.js";
import { backoff, ResyncPacer } from "../protocol/backoff.js";
import { InvalidInputError } from "../protocol/errors.js";
import { checkId } from "../protocol/ids.js";
import { statusAfter, type StatusChange, type UserStatus } from "../protocol/users.js";
import { Pause } from "./background.js";
import type { Subscriptions } from "./subscription.js";
import type { SyncReason } from "./watch.js";

/** Most users one UserWatch follows. */
export const WATCHED_USERS = 1_000;

/** How a UserWatch follows one bucket's users channel. */
interface Follow {
  readonly bucket: number;
  /** The watched users whose status lives in this bucket. */
  readonly users: string[];
  /** Where the bucket's chain stands: the last change applied, or the snapshot's. */
  epoch: string;
  seq: number;
  /** While a snapshot is wanted or read: the changes received meanwhile, in order; else null. */
  held: StatusChange[] | null;
  /** Why the next snapshot is wanted, or null when none is. */
  wanted: SyncReason | null;
  syncing: boolean;
  readonly pacer: ResyncPacer;
  close: () => Promise<void>;
}

interface UserWatchEvents {
  /** A watched user went online or offline (their status as it now is). */
  change: [status: UserStatus];
  /** A bucket's users were read anew (after the changes that tells apart were reported). */
  sync: [reason: SyncReason];
}

/**
 * A live contact list: the status of up to WATCHED_USERS users, kept current by the online and
 * offline transitions of their buckets' users channels. Subscribed first, then a snapshot per
 * bucket (its users and where its chain stood, read together), then every later change in
 * order, each bucket's chain checked as a room's events are: a gap, another epoch or a lost
 * subscriber connection takes a new snapshot of that bucket, and the differences are reported
 * as changes. Created by `Subscriber.watchUsers()`.
 */
export class UserWatch extends EventEmitter<UserWatchEvents> {
  private readonly current = new Map<string, UserStatus>();
  private readonly follows: Follow[];
  private started = false;
  private lost = false;
  private isClosed = false;
  private readonly pause = new Pause();

  constructor(
    private readonly subscriber: Subscriptions,
    users: readonly string[],
  ) {
    super();
    const list: unknown = users;
    if (!Array.isArray(list) || users.length === 0 || users.length > WATCHED_USERS) {
      throw new InvalidInputError(
        "INVALID_OPTION",
        `watchUsers takes an array of 1 to ${WATCHED_USERS} user ids`,
      );
    }
    const byBucket = new Map<number, string[]>();
    for (const user of new Set(users)) {
      const bucket = subscriber.rollcall.userBucket(checkId("user", user));
      byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), user]);
      this.current.set(user, { user, online: false, since: null, lastSeenAt: null });
    }
    this.follows = [...byBucket].map(([bucket, users]) => ({
      bucket,
      users,
      epoch: "",
      seq: 0,
      held: [],
      wanted: "start",
      syncing: false,
      pacer: new ResyncPacer(),
      close: () => Promise.resolve(),
    }));
  }

  /** Every watched user's status, in the order first given. */
  get statuses(): UserStatus[] {
    return [...this.current.values()];
  }

  /** A watched user's status; undefined for a user not watched. */
  status(user: string): UserStatus | undefined {
    return this.current.get(user);
  }

  /** Every bucket's changes since its last snapshot applied: no gap seen, connection up. */
  get synced(): boolean {
    return this.started && !this.lost && this.follows.every((f) => f.held === null);
  }

  /** Subscribes to the users' buckets, then takes the first snapshots; on failure it closes. */
  async open(): Promise<void> {
    try {
      await Promise.all(
        this.follows.map(async (follow) => {
          const subscription = await this.subscriber.subscribeUsers(
            follow.bucket,
            (change) => this.receive(follow, change),
            { onLost: () => this.lose(), onResubscribed: () => this.resyncAll() },
          );
          follow.close = () => subscription.close();
        }),
      );
      await Promise.all(this.follows.map((follow) => this.sync(follow)));
      this.started = true;
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  /** Stops following; each bucket's channel is unsubscribed once no one else listens to it. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.pause.interrupt();
    await Promise.all(this.follows.map((follow) => follow.close()));
  }

  private receive(follow: Follow, change: StatusChange): void {
    if (this.isClosed) return;
    if (follow.held) {
      follow.held.push(change);
      return;
    }
    if (change.epoch === follow.epoch && change.seq <= follow.seq) return; // seen already
    if (change.epoch !== follow.epoch || change.prev !== follow.seq) {
      this.resync(follow, "gap", change);
      return;
    }
    this.apply(follow, change);
  }

  private apply(follow: Follow, change: StatusChange): void {
    follow.seq = change.seq;
    const before = this.current.get(change.user);
    if (before) this.set(statusAfter(change, before));
  }

  /** Records a user's status, telling listeners when it differs from what it was. */
  private set(status: UserStatus): void {
    const before = this.current.get(status.user);
    this.current.set(status.user, status);
    const same =
      before?.online === status.online &&
      before.since === status.since &&
      before.lastSeenAt === status.lastSeenAt;
    if (!same && this.started) this.tell(() => this.emit("change", status));
  }

  private lose(): void {
    if (this.subscriber.closed) {
      void this.close();
      return;
    }
    this.lost = true;
    for (const follow of this.follows) follow.held ??= [];
  }

  private resyncAll(): void {
    this.lost = false;
    for (const follow of this.follows) this.resync(follow, "reconnect");
  }

  /** Holds the bucket's changes (`first` among them) until a new snapshot of it is installed. */
  private resync(follow: Follow, reason: SyncReason, first?: StatusChange): void {
    follow.held ??= [];
    if (first) follow.held.push(first);
    follow.wanted = reason;
    if (follow.syncing || !this.started) return;
    void this.sync(follow).catch((error: unknown) => this.subscriber.report(error));
  }

  /**
   * Takes snapshots of the bucket until one is installed with no newer one wanted. Before the
   * watch started, a failure rejects (open() fails); after, failures are reported and retried.
   */
  private async sync(follow: Follow): Promise<void> {
    follow.syncing = true;
    try {
      let failures = 0;
      while (follow.wanted !== null && !this.isClosed) {
        const reason = follow.wanted;
        follow.wanted = null;
        if (reason === "gap") {
          const pause = follow.pacer.delay(performance.now());
          if (pause > 0) await this.pause.wait(pause);
          if (this.isClosed) return;
        }
        let snapshot: StatusSnapshot;
        try {
          snapshot = await this.subscriber.rollcall.statusSnapshot(follow.bucket, follow.users);
        } catch (error) {
          if (reason === "start") throw error;
          this.subscriber.report(error);
          follow.wanted ??= reason;
          failures += 1;
          await this.pause.wait(backoff(failures, { firstMs: 100, maxMs: 5_000 }));
          continue;
        }
        failures = 0;
        // A newer snapshot is wanted (the connection came back meanwhile): this one may miss changes.
        if (follow.wanted === null && !this.isClosed) this.install(follow, snapshot, reason);
      }
    } finally {
      follow.syncing = false;
    }
  }

  /** The snapshot, then the changes held since that came after it, in order. */
  private install(follow: Follow, snapshot: StatusSnapshot, reason: SyncReason): void {
    const held = follow.held ?? [];
    follow.held = this.lost ? [] : null;
    follow.epoch = snapshot.epoch;
    follow.seq = snapshot.seq;
    for (const status of snapshot.statuses) this.set(status);
    if (reason !== "start") this.tell(() => this.emit("sync", reason));
    for (const change of held) {
      if (follow.held) follow.held.push(change);
      else this.receive(follow, change);
    }
  }

  /** Calls the caller's listeners; one that throws is reported, never propagated. */
  private tell(emit: () => void): void {
    try {
      emit();
    } catch (error) {
      this.subscriber.report(error);
    }
  }
}
