import type { Rollcall } from "../engine/rollcall.js";
import type { EventType, PresenceEvent } from "../protocol/events.js";
import type { StatusChange } from "../protocol/users.js";

export type PresenceListener = (event: PresenceEvent) => void;

export interface SubscribeOptions {
  /** Deliver only these types, e.g. `["join", "leave"]`. Default: every type. */
  types?: readonly EventType[];
  /** The subscriber connection dropped (or the subscriber closed): events are being missed. */
  onLost?: () => void;
  /**
   * The connection is back and the room subscribed again. Events published in between are lost
   * for good, so anything built from the events must resync (a RoomWatch does).
   */
  onResubscribed?: () => void;
}

export interface Subscription {
  readonly room: string;
  /** Stops delivery; the room's last subscription unsubscribes its channel. Never rejects. */
  close(): Promise<void>;
}

/** What a room's consumers need of a Subscriber: its rooms' events, its engine, its reports. */
export interface Subscriptions {
  readonly rollcall: Rollcall;
  readonly closed: boolean;
  subscribe(
    room: string,
    listener: PresenceListener,
    options?: SubscribeOptions,
  ): Promise<Subscription>;
  /** A bucket's users' online and offline transitions (see Subscriber.subscribeUsers). */
  subscribeUsers(
    bucket: number,
    listener: (change: StatusChange) => void,
    options?: Omit<SubscribeOptions, "types">,
  ): Promise<{ close(): Promise<void> }>;
  report(error: unknown): void;
}
