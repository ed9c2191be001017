import { EventEmitter } from "node:events";
import { backoff, ResyncPacer } from "../protocol/backoff.js";
import type { PresenceEvent } from "../protocol/events.js";
import {
  Replica,
  type Outcome,
  type ReplicaRoster,
  type RosterChange,
} from "../protocol/replica.js";
import { Pause } from "./background.js";
import { RoomCheck } from "./roomCheck.js";
import type { Subscription, Subscriptions } from "./subscription.js";

/**
 * Why the replica was brought up to date. start: the first snapshot; gap: an event did not
 * follow the last one applied (or came from another epoch); reconnect: the subscriber
 * connection came back, so events may have been lost; log: a gap was closed with the events
 * read back from the event log, without a snapshot; verify: a periodic check found Redis no
 * longer holding what the replica does (keys evicted or expired unannounced, an event lost).
 */
export type SyncReason = "start" | "gap" | "reconnect" | "log" | "verify";

interface RoomWatchEvents {
  /** The replica changed; read `roster` for the whole of it. */
  change: [change: RosterChange];
  /** The replica was replaced by a snapshot (after the changes that tells apart were reported). */
  sync: [reason: SyncReason];
}

/**
 * A live replica of one room's roster, for an instance with clients in the room: subscribed
 * first, then a snapshot, then every later event in order (the rules are the pure Replica's).
 * A gap, another epoch or a lost subscriber connection means something was missed: it takes a
 * new snapshot and reports the difference as changes. Created by `Subscriber.watch()`.
 *
 * A room past `rosterLimit` members is read in pages, each consistent with its own seq, and
 * assembled with the events that came meanwhile (Replica.installPages).
 */
export class RoomWatch extends EventEmitter<RoomWatchEvents> {
  private readonly replica: Replica;
  /** Why the next snapshot is wanted, or null when none is. */
  private wanted: SyncReason | null = "start";
  /** A sync loop runs (or open() is under way): it takes any snapshot wanted meanwhile. */
  private syncing = false;
  private started = false;
  /** The subscriber connection is down: events are being missed until it is back. */
  private lost = false;
  private isSynced = false;
  private isClosed = false;
  private subscription: Subscription | undefined;
  private readonly pause = new Pause();
  /** Gaps that keep coming (messages that are not rollcall's) resync with backoff, not in a loop. */
  private readonly pacer = new ResyncPacer();
  /** Checks the synced replica against Redis now and then (RoomCheck). */
  private readonly check: RoomCheck;

  constructor(
    private readonly subscriber: Subscriptions,
    readonly room: string,
  ) {
    super();
    this.replica = new Replica(room);
    this.check = new RoomCheck(
      () => subscriber.rollcall.mark(room),
      () => (this.isSynced && !this.syncing ? this.replica.roster : null),
      () => this.resync("verify"),
      (error) => subscriber.report(error),
    );
  }

  /** The replica as of the last event applied; members in roster() order. */
  get roster(): ReplicaRoster {
    return this.replica.roster;
  }

  /** Every event since the last snapshot applied: no gap seen, no snapshot due, connection up. */
  get synced(): boolean {
    return this.isSynced;
  }

  /** Subscribes, then takes the first snapshot; on failure it closes and rejects. */
  async open(): Promise<void> {
    this.syncing = true;
    try {
      this.subscription = await this.subscriber.subscribe(this.room, (e) => this.receive(e), {
        onLost: () => this.lose(),
        onResubscribed: () => this.resync("reconnect"),
      });
      await this.sync();
      this.check.start();
    } catch (error) {
      await this.close();
      throw error;
    } finally {
      this.syncing = false;
    }
  }

  /** Stops following the room; its channel is unsubscribed once no one else listens to it. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.isSynced = false;
    this.check.stop();
    this.pause.interrupt();
    await this.subscription?.close();
  }

  private receive(event: PresenceEvent): void {
    if (this.isClosed) return;
    this.report(this.replica.receive(event), "gap");
  }

  private report(outcome: Outcome, reason: SyncReason): void {
    for (const change of outcome.changes) this.tell(() => this.emit("change", change));
    if (outcome.resync) this.resync(reason);
  }

  private lose(): void {
    this.isSynced = false;
    if (this.subscriber.closed) {
      void this.close();
      return;
    }
    this.lost = true;
    this.replica.hold();
  }

  private resync(reason: SyncReason): void {
    if (reason === "reconnect") this.lost = false;
    this.isSynced = false;
    this.replica.hold();
    this.wanted = reason;
    if (this.syncing) return;
    this.syncing = true;
    void this.sync()
      .catch((error: unknown) => this.subscriber.report(error))
      .finally(() => (this.syncing = false));
  }

  /**
   * Takes snapshots until one is installed with no newer one wanted. Before the first, a failure
   * rejects (open() fails); after it, failures are reported and retried with backoff.
   */
  private async sync(): Promise<void> {
    let failures = 0;
    while (this.wanted !== null && !this.isClosed) {
      const reason = this.wanted;
      this.wanted = null;
      if (reason === "gap") {
        const pause = this.pacer.delay(performance.now());
        if (pause > 0) await this.pause.wait(pause);
        if (this.isClosed) return;
      }
      let snapshot;
      try {
        if (reason === "gap" && (await this.recover())) continue;
        this.replica.requestSnapshot();
        snapshot = await this.subscriber.rollcall.rosterPages(this.room);
      } catch (error) {
        if (!this.started) throw error;
        this.subscriber.report(error);
        this.wanted ??= reason;
        failures += 1;
        await this.pause.wait(backoff(failures, { firstMs: 100, maxMs: 5_000 }));
        continue;
      }
      failures = 0;
      // A newer snapshot is wanted (the connection came back meanwhile): this one may miss events.
      if (this.wanted === null && !this.isClosed) this.install(snapshot, reason);
    }
  }

  /** Closes a gap from the event log, when it is on and still holds the missing events. */
  private async recover(): Promise<boolean> {
    const { rollcall } = this.subscriber;
    const after = this.replica.log;
    if (rollcall.settings.logLength === 0 || after === undefined || this.lost) return false;
    const events = await rollcall.readLog(this.room, after);
    if (this.wanted !== null || this.isClosed) return false;
    const outcome = this.replica.recover(events);
    for (const change of outcome.changes) this.tell(() => this.emit("change", change));
    if (outcome.resync) return false;
    this.isSynced = true;
    this.announceSync("log");
    return true;
  }

  private install(pages: Parameters<Replica["installPages"]>[0], reason: SyncReason): void {
    this.started = true;
    const outcome = this.replica.installPages(pages);
    // Taken while the connection is down, it is the best view there is, but not a synced one:
    // events are held again until the connection is back and the next snapshot comes.
    if (this.lost) this.replica.hold();
    this.isSynced = !this.lost && !outcome.resync;
    for (const change of outcome.changes) this.tell(() => this.emit("change", change));
    this.announceSync(reason);
    if (outcome.resync) this.resync("gap");
  }

  private announceSync(reason: SyncReason): void {
    this.subscriber.rollcall.metrics.add("rollcall.watch.syncs", 1, { reason });
    this.tell(() => this.emit("sync", reason));
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
