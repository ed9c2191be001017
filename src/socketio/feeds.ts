import { backoff } from "../protocol/backoff.js";
import type { PresenceEvent } from "../protocol/events.js";
import type { ReplicaRoster } from "../protocol/replica.js";
import { Pause } from "../runtime/background.js";
import type { Subscriber } from "../runtime/subscriber.js";
import { RoomWatch } from "../runtime/watch.js";

/** Where a room's frames go: its sockets in this process. */
export interface Delivery {
  /** An event, to every local socket in the room. */
  event(room: string, event: PresenceEvent): void;
  /** A snapshot, to every local socket in the room. */
  snapshot(room: string, snapshot: ReplicaRoster): void;
  report(error: unknown): void;
}

interface Feed {
  readonly room: string;
  /** The local sockets (any value standing for one) that follow the room. */
  readonly followers: Set<unknown>;
  /** The room's watch, synced once its first snapshot is in. */
  watch: RoomWatch | undefined;
  readonly pause: Pause;
  closed: boolean;
}

/**
 * The rooms local sockets follow, each fed by one RoomWatch: its replica answers every socket's
 * snapshot without a Redis read, and the events it applies (in chain order, resynced on any gap,
 * epoch change or lost connection) go to the room's local sockets as they were published, so a
 * client's own Replica follows the same chain. A resync goes out as one snapshot for the room.
 */
export class Feeds {
  private readonly feeds = new Map<string, Feed>();

  constructor(
    private readonly subscriber: Subscriber,
    private readonly delivery: Delivery,
  ) {}

  /** A socket follows a room: the room's watch opens with its first follower. */
  follow(room: string, follower: unknown): void {
    let feed = this.feeds.get(room);
    if (!feed) {
      feed = { room, followers: new Set(), watch: undefined, pause: new Pause(), closed: false };
      this.feeds.set(room, feed);
      void this.open(feed);
    }
    feed.followers.add(follower);
  }

  /** A socket stops following a room: the watch closes with its last follower. */
  unfollow(room: string, follower: unknown): void {
    const feed = this.feeds.get(room);
    if (!feed?.followers.delete(follower) || feed.followers.size > 0) return;
    this.feeds.delete(room);
    void this.shut(feed);
  }

  /**
   * The room's replica, when it holds every event so far: what a socket entering the room gets.
   * Undefined while it is being (re)synced: the snapshot that ends it goes to every socket.
   */
  snapshot(room: string): ReplicaRoster | undefined {
    const watch = this.feeds.get(room)?.watch;
    return watch?.synced ? watch.roster : undefined;
  }

  async close(): Promise<void> {
    const feeds = [...this.feeds.values()];
    this.feeds.clear();
    await Promise.all(feeds.map((feed) => this.shut(feed)));
  }

  private async shut(feed: Feed): Promise<void> {
    feed.closed = true;
    feed.pause.interrupt();
    await feed.watch?.close();
  }

  /** Opens the room's watch, retried with backoff while Redis cannot give its first snapshot. */
  private async open(feed: Feed): Promise<void> {
    const { room } = feed;
    for (let failures = 1; !feed.closed; failures += 1) {
      const watch = new RoomWatch(this.subscriber, room);
      watch.on("change", ({ event }) => {
        // Changes without an event come from a snapshot, which goes out whole below.
        if (event && !feed.closed) this.delivery.event(room, event);
      });
      watch.on("sync", (reason) => {
        // After "log" the events read back went out as events: the chain is whole.
        if (reason !== "log" && !feed.closed) this.delivery.snapshot(room, watch.roster);
      });
      // Set first: a socket entering once the first snapshot went out must find it synced.
      feed.watch = watch;
      try {
        await watch.open();
        if (feed.closed) await watch.close();
        return;
      } catch (error) {
        feed.watch = undefined;
        this.delivery.report(error);
        await feed.pause.wait(backoff(failures, { firstMs: 100, maxMs: 5_000 }));
      }
    }
  }
}
