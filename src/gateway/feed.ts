import type { EventType, PresenceEvent } from "../protocol/events.js";

/** What one socket receives of a room: the types it asked for, and where its chain stands. */
export interface Delivery {
  readonly types: ReadonlySet<EventType> | null;
  /** The last event sent (or the snapshot's number), for a socket that filters types. */
  last: { epoch: string; seq: number } | null;
  /** This gateway missed events since `last`: the next one goes out as it is, gap and all. */
  broken: boolean;
}

/**
 * One room's events on this gateway, fanned out to the sockets in the room. A socket that asked
 * for some types only must still see an unbroken chain of what it gets, or its replica would
 * resync at every skipped event: so when this gateway saw every event in between (each one's
 * prev is the previous one), the next event sent to that socket has its `prev` set to the last
 * event the socket got. A gap this gateway saw itself goes out unchanged, for the client to
 * detect and resync.
 */
export class RoomFeed<S> {
  readonly deliveries = new Map<S, Delivery>();
  private epoch = "";
  private seq = -1;
  /** The last event log entry id this feed knows it has everything up to (log on). */
  private logId: string | undefined;

  get log(): string | undefined {
    return this.logId;
  }

  receive(event: PresenceEvent, send: (to: S, event: PresenceEvent) => void): void {
    // Read back from the log after a lost connection, some events may have come already.
    if (event.epoch === this.epoch && event.seq <= this.seq) return;
    const continuous = event.epoch === this.epoch && event.prev === this.seq;
    this.epoch = event.epoch;
    this.seq = event.seq;
    if (event.log !== undefined) this.logId = event.log;
    for (const [to, delivery] of this.deliveries) {
      if (delivery.types && !delivery.types.has(event.type)) {
        if (!continuous) delivery.broken = true;
        continue;
      }
      const { last } = delivery;
      const rewrite =
        delivery.types !== null &&
        continuous &&
        !delivery.broken &&
        last !== null &&
        last.epoch === event.epoch &&
        event.prev > last.seq;
      send(to, rewrite ? { ...event, prev: last.seq } : event);
      delivery.last = { epoch: event.epoch, seq: event.seq };
      delivery.broken = false;
    }
  }

  /**
   * A snapshot was sent: the socket's chain goes on from it, or from a later event sent already.
   * It was read after this feed subscribed, so the feed has every event after it, too.
   */
  restart(to: S, epoch: string, seq: number, log?: string): void {
    if (this.epoch !== epoch || this.seq < seq)
      [this.epoch, this.seq, this.logId] = [epoch, seq, log];
    const delivery = this.deliveries.get(to);
    if (!delivery) return;
    const { last } = delivery;
    if (last === null || last.epoch !== epoch || last.seq < seq) {
      Object.assign(delivery, { last: { epoch, seq }, broken: false });
    }
  }
}
