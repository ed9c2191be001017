import { Sequencer } from "../protocol/chain.js";
import type { EventType, PresenceEvent } from "../protocol/events.js";
import type { Snapshot } from "../protocol/replica.js";

/** What one socket receives of a room: the types it asked for, and where its chain stands. */
export interface Delivery {
  readonly types: ReadonlySet<EventType> | null;
  /** The last event sent (or the snapshot's number), for a socket that filters types. */
  last: { epoch: string; seq: number } | null;
}

/** Where a feed's frames go. */
export interface Sink<S> {
  event(to: S, event: PresenceEvent): void;
  snapshot(to: S, snapshot: Snapshot): void;
}

/**
 * One room's events on this gateway, fanned out to the sockets in the room. The feed follows the
 * room's chain itself (the Sequencer's rules) and passes on only events that follow it: a gap,
 * another epoch or a message that conflicts with one already passed on (none of which a socket
 * could use) is held back, and `receive` asks for a resync instead, which the gateway does once
 * for the whole room (`install`) rather than each socket on its own. So a message on the room's
 * channel that does not fit reaches no browser, and costs at most one snapshot.
 *
 * A socket that asked for some types only still gets an unbroken chain of what it gets: the
 * next event sent to it has its `prev` set to the last event it got.
 */
export class RoomFeed<S> {
  readonly deliveries = new Map<S, Delivery>();
  private readonly events = new Sequencer((event) => this.pass(event));
  private started = false;
  /** The last event log entry id this feed knows it has everything up to (log on). */
  private logId: string | undefined;

  constructor(private readonly sink: Sink<S>) {}

  get log(): string | undefined {
    return this.logId;
  }

  /** Passes an event on when it follows; true when the room needs a resync. */
  receive(event: PresenceEvent): boolean {
    return this.events.receive(event);
  }

  /** Holds events from now on (the subscriber connection dropped). */
  hold(): void {
    this.events.hold();
  }

  /** A resync is about to read a snapshot: the events held so far are older. */
  requestSnapshot(): void {
    this.events.requestSnapshot();
  }

  /** Events read back from the log, before the held ones; true when a snapshot is still needed. */
  recover(events: readonly PresenceEvent[]): boolean {
    return this.events.recover(events);
  }

  /**
   * A snapshot of the room, read for a resync: every socket gets it, and the chain starts over
   * from it (even below a number some message claimed), then the held events that follow it
   * pass on. True when another resync is needed.
   */
  install(snapshot: Snapshot): boolean {
    this.started = true;
    this.logId = snapshot.log;
    for (const [to, delivery] of this.deliveries) {
      this.sink.snapshot(to, snapshot);
      delivery.last = { epoch: snapshot.epoch, seq: snapshot.seq };
    }
    return this.events.install(snapshot.epoch, snapshot.seq, snapshot.count);
  }

  /**
   * One socket's own snapshot (its join) was sent: its chain goes on from it, or from a later
   * event sent already. The feed's chain starts from the first one; after that a socket's
   * snapshot never moves it (it was read after the feed subscribed, so any event it is ahead of
   * is on its way to the feed, for the other sockets). True when a resync is needed.
   */
  restart(to: S, snapshot: Snapshot): boolean {
    const { epoch, seq } = snapshot;
    const delivery = this.deliveries.get(to);
    if (delivery) {
      const { last } = delivery;
      if (last === null || last.epoch !== epoch || last.seq < seq) delivery.last = { epoch, seq };
    }
    if (this.started) return false;
    this.started = true;
    this.logId = snapshot.log;
    return this.events.install(epoch, seq, snapshot.count);
  }

  private pass(event: PresenceEvent): void {
    if (event.log !== undefined) this.logId = event.log;
    for (const [to, delivery] of this.deliveries) {
      if (delivery.types && !delivery.types.has(event.type)) continue;
      const { last } = delivery;
      // Its own snapshot, read after this event was published, has it already.
      if (last !== null && last.epoch === event.epoch && event.seq <= last.seq) continue;
      const rewrite =
        delivery.types !== null &&
        last !== null &&
        last.epoch === event.epoch &&
        event.prev > last.seq;
      this.sink.event(to, rewrite ? { ...event, prev: last.seq } : event);
      delivery.last = { epoch: event.epoch, seq: event.seq };
    }
  }
}
