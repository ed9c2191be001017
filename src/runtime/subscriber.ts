import { EventEmitter } from "node:events";
import type { Rollcall } from "../engine/rollcall.js";
import type { Client } from "../engine/script.js";
import { RedisCallError } from "../engine/errors.js";
import { InvalidInputError, UnexpectedReplyError } from "../protocol/errors.js";
import { signedBy } from "../engine/signature.js";
import { EVENT_TYPES, parseEvent, type EventType, type PresenceEvent } from "../protocol/events.js";
import { parseStatusChange, type StatusChange } from "../protocol/users.js";
import { callback, describe, knownKeys } from "../protocol/options.js";
import { backoff } from "../protocol/backoff.js";
import { Pause, reportError } from "./background.js";
import type {
  PresenceListener,
  SubscribeOptions,
  Subscription,
  Subscriptions,
} from "./subscription.js";
import { RoomWatch } from "./watch.js";
import { UserWatch } from "./userWatch.js";

export type { PresenceListener, SubscribeOptions, Subscription } from "./subscription.js";

/** Least time between two reads of a bucket's channel key. */
const KEY_READS_MS = 1_000;
/** Messages held while a bucket's key is read, at most. */
const MAX_QUEUED = 10_000;

/** The epoch a message names, read without believing anything else of it. */
function epochOf(message: string): string | null {
  return /"epoch":"([0-9a-f]+)"/.exec(message)?.[1] ?? null;
}

export interface SubscriberOptions {
  /**
   * Sees every message before it is parsed and passes it on by calling `deliver`: at once, later,
   * twice or never. A seam for tests that drop or reorder messages; the default delivers at once.
   */
  relay?: (channel: string, message: string, deliver: (message: string) => void) => void;
}

interface SubscriberEvents {
  /** A malformed or foreign message (skipped), a listener that threw, or a connection error. */
  error: [error: Error];
}

/** One subscription: what it takes of its channel's messages, what it is told of the connection. */
interface Tap {
  /** Takes a message of the channel, parsed (a room's event, a user's status change). */
  readonly receive: (message: never) => void;
  readonly onLost: (() => void) | undefined;
  readonly onResubscribed: (() => void) | undefined;
}

/** A subscribed channel: a room's events, or a bucket's users' status changes. */
interface Channel {
  /** The bucket whose key signs its messages. */
  readonly bucket: number;
  /** What it carries, in words: `room "lobby"`, `users of bucket 3`. */
  readonly label: string;
  /** A message, its signature checked and removed, as its taps take it; throws if malformed. */
  readonly parse: (signed: string) => unknown;
  readonly taps: Set<Tap>;
  /** Settles when Redis has confirmed the subscription. */
  readonly subscribed: Promise<unknown>;
}

/**
 * Room events from every instance, over one dedicated subscriber connection per process shared by
 * all rooms: each room's channel is subscribed while at least one subscription to it is open.
 * Nothing it receives or suffers escapes as an exception: errors go to 'error' listeners.
 */
export class Subscriber extends EventEmitter<SubscriberEvents> implements Subscriptions {
  /** The subscriber connection, duplicated from the Rollcall's client. */
  readonly connection: Client;
  private readonly channels = new Map<string, Channel>();
  private readonly relay: NonNullable<SubscriberOptions["relay"]>;
  private lost = false;
  private resubscribing = false;
  /** Per bucket: the key its messages are signed with, for which epoch, read when. */
  private readonly keys = new Map<number, { epoch: string; key: string; at: number }>();
  /** Per bucket whose key is being read: the messages waiting for it, in order. */
  private readonly reading = new Map<number, [name: string, message: string][]>();
  private readonly pause = new Pause();
  private isClosed = false;

  constructor(
    readonly rollcall: Rollcall,
    options?: SubscriberOptions,
  ) {
    super();
    const { relay } = knownKeys(options, ["relay"]);
    this.relay =
      callback<NonNullable<SubscriberOptions["relay"]>>("relay", relay) ??
      ((_channel, message, deliver) => deliver(message));
    this.connection = rollcall.subscriberConnection();
    this.connection.on("smessage", (channel: string, message: string) => {
      // This runs inside the connection's reply parser: a throw here would corrupt the connection.
      try {
        this.relay(channel, message, (relayed) => this.dispatch(channel, relayed));
      } catch (error) {
        this.report(error);
      }
    });
    this.connection.on("error", (error: Error) => {
      this.report(new RedisCallError("subscriber connection", error));
    });
    // A standalone connection says 'close', and 'ready' once it is back. A Cluster's sharded
    // subscribers come and go per shard; after any change of topology the group re-subscribes and
    // says 'subscribersReady' — also when a failover or a migration unsubscribed a shard's
    // channels without any subscriber being lost (messages in between were), so that signal
    // alone counts as a loss and a return.
    if (this.connection.isCluster) {
      this.connection.on("-subscriber", () => this.onLost());
      this.connection.on("subscribersReady", () => {
        this.onLost();
        void this.onBack();
      });
    } else {
      this.connection.on("close", () => this.onLost());
      this.connection.on("ready", () => void this.onBack());
    }
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Delivers the room's events (of the given types) until the subscription is closed. */
  async subscribe(
    room: string,
    listener: PresenceListener,
    options?: SubscribeOptions,
  ): Promise<Subscription> {
    const name = this.rollcall.channel(room);
    const take = callback<PresenceListener>("listener", listener);
    if (!take) throw new InvalidInputError("INVALID_OPTION", "listener is required");
    const { types, ...hooks } = checkSubscribeOptions(options);
    const receive = (event: PresenceEvent) => {
      if (!types || types.has(event.type)) take(event);
    };
    const label = `room ${JSON.stringify(room)}`;
    const parse = (signed: string) => {
      const event = parseEvent(signed);
      if (event.room !== room) throw new Error("an event of another room");
      return event;
    };
    const bucket = this.rollcall.bucketOf(room);
    await this.tap(name, { bucket, label, parse }, { receive, ...hooks });
    return { room, close: () => this.unsubscribe(name, receive) };
  }

  /**
   * Delivers the online and offline transitions of a bucket's users (every user whose status
   * lives in it: Rollcall.userBucket) until closed. A UserWatch follows them for its users.
   */
  async subscribeUsers(
    bucket: number,
    listener: (change: StatusChange) => void,
    options?: Omit<SubscribeOptions, "types">,
  ): Promise<{ close(): Promise<void> }> {
    const name = this.rollcall.usersChannel(bucket);
    const receive = callback<(change: StatusChange) => void>("listener", listener);
    if (!receive) throw new InvalidInputError("INVALID_OPTION", "listener is required");
    const { onLost, onResubscribed } = checkSubscribeOptions(options);
    const label = `users of bucket ${bucket}`;
    const tap = { receive, onLost, onResubscribed };
    await this.tap(name, { bucket, label, parse: parseStatusChange }, tap);
    return { close: () => this.unsubscribe(name, receive) };
  }

  /** Adds a tap to a channel, subscribing it if it is new; resolves once Redis confirmed it. */
  private async tap(
    name: string,
    made: Pick<Channel, "bucket" | "label" | "parse">,
    tap: Tap,
  ): Promise<void> {
    let channel = this.channels.get(name);
    if (!channel) {
      channel = { ...made, taps: new Set(), subscribed: this.connection.ssubscribe(name) };
      this.channels.set(name, channel);
    }
    channel.taps.add(tap);
    try {
      await channel.subscribed;
    } catch (error) {
      if (this.channels.get(name) === channel) this.channels.delete(name);
      throw new RedisCallError(`subscribe to ${made.label}`, error);
    }
  }

  /** A live replica of the room's roster, kept current by its events. Close it when done. */
  async watch(room: string): Promise<RoomWatch> {
    const watch = new RoomWatch(this, room);
    await watch.open();
    return watch;
  }

  /**
   * A live contact list: the status of up to WATCHED_USERS users, from a snapshot, kept current
   * by their buckets' transitions, resynced after a gap. Close it when done.
   */
  async watchUsers(users: readonly string[]): Promise<UserWatch> {
    const watch = new UserWatch(this, users);
    await watch.open();
    return watch;
  }

  /** Drops the connection; every subscription hears `onLost` and receives nothing more. */
  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.pause.interrupt();
    this.notify("onLost");
    this.channels.clear();
    this.connection.disconnect();
  }

  /**
   * Hands an error to the 'error' listeners, or, when there are none, to process.emitWarning:
   * an 'error' event without a listener would throw and take the process down.
   */
  report(error: unknown): void {
    reportError(this, error);
  }

  /**
   * Checks each message's signature with its bucket's key for the epoch it names, read from Redis
   * when an epoch is new here (at the start, after a failover or a restart). While it is read, the
   * bucket's messages wait, in order. Reads are at least KEY_READS_MS apart: a flood of messages
   * naming forged epochs costs one read per bucket and second, and delays but never drops the
   * real ones (unless more than MAX_QUEUED wait).
   */
  private dispatch(name: string, message: string): void {
    const channel = this.channels.get(name);
    if (!channel) return; // unsubscribed while the message was on its way
    const { bucket } = channel;
    const queue = this.reading.get(bucket);
    if (queue) {
      if (queue.length < MAX_QUEUED) queue.push([name, message]);
      else this.report(new UnexpectedReplyError("message dropped: too many waiting", message));
      return;
    }
    const known = this.keys.get(bucket);
    if (known && known.epoch === epochOf(message)) return this.deliver(channel, message, known.key);
    this.reading.set(bucket, [[name, message]]);
    const wait = known ? Math.max(0, known.at + KEY_READS_MS - performance.now()) : 0;
    setTimeout(() => void this.readKey(bucket), wait).unref();
  }

  private async readKey(bucket: number): Promise<void> {
    let read: { epoch: string; key: string } | null = null;
    try {
      read = await this.rollcall.channelKeyOf(bucket);
    } catch (error) {
      this.report(error);
    }
    const known = { epoch: read?.epoch ?? "", key: read?.key ?? "", at: performance.now() };
    this.keys.set(bucket, known);
    const queued = this.reading.get(bucket) ?? [];
    this.reading.delete(bucket);
    for (const [name, message] of queued) {
      const channel = this.channels.get(name);
      const matches = known.key !== "" && epochOf(message) === known.epoch;
      if (channel) this.deliver(channel, message, matches ? known.key : null);
    }
  }

  /** Delivers a message signed with `key` to the channel's listeners; reports any other. */
  private deliver(channel: Channel, message: string, key: string | null): void {
    const where = `message on the channel of ${channel.label}`;
    const signed = key === null ? null : signedBy(message, key);
    if (signed === null) {
      this.report(new UnexpectedReplyError(`${where}, not signed by its bucket`, message));
      return;
    }
    let parsed: unknown;
    try {
      parsed = channel.parse(signed);
    } catch (error) {
      const why = error instanceof UnexpectedReplyError ? "" : ` (${(error as Error).message})`;
      this.report(new UnexpectedReplyError(where + why, message));
      return;
    }
    for (const { receive } of [...channel.taps]) {
      try {
        (receive as (message: unknown) => void)(parsed);
      } catch (error) {
        this.report(error);
      }
    }
  }

  /** Removes the tap whose `receive` this is; the channel's last goes with its subscription. */
  private async unsubscribe(name: string, receive: Tap["receive"]): Promise<void> {
    const channel = this.channels.get(name);
    const tap = [...(channel?.taps ?? [])].find((t) => t.receive === receive);
    if (!channel || !tap) return;
    channel.taps.delete(tap);
    if (channel.taps.size > 0) return;
    this.channels.delete(name);
    if (this.isClosed) return;
    try {
      await this.connection.sunsubscribe(name);
    } catch (error) {
      // Harmless: messages still arriving find no channel and are dropped, and a reconnect only
      // re-subscribes the channels in use.
      this.report(new RedisCallError(`unsubscribe from ${channel.label}`, error));
    }
  }

  private onLost(): void {
    if (this.lost || this.isClosed) return;
    this.lost = true;
    this.rollcall.metrics.add("rollcall.subscriber.connection", 1, { change: "lost" });
    this.notify("onLost");
  }

  private async onBack(): Promise<void> {
    if (!this.lost || this.isClosed || this.resubscribing) return;
    this.resubscribing = true;
    try {
      // Confirmed subscriptions, not merely a connection: only then is a snapshot safe to take.
      // A failure (a shard still failing over) is retried with backoff, on the same connection.
      for (let failures = 1; !this.isClosed; failures += 1) {
        try {
          await Promise.all(
            [...this.channels.keys()].map((name) => this.connection.ssubscribe(name)),
          );
          break;
        } catch (error) {
          if (this.isClosed) return;
          this.report(new RedisCallError("resubscribe", error));
          await this.pause.wait(backoff(failures, { firstMs: 100, maxMs: 5_000 }));
        }
      }
    } finally {
      this.resubscribing = false;
    }
    if (this.isClosed) return;
    this.lost = false;
    this.rollcall.metrics.add("rollcall.subscriber.connection", 1, { change: "back" });
    this.notify("onResubscribed");
  }

  private notify(hook: "onLost" | "onResubscribed"): void {
    const taps = [...this.channels.values()].flatMap((c) => [...c.taps]);
    for (const tap of taps) {
      try {
        tap[hook]?.();
      } catch (error) {
        this.report(error);
      }
    }
  }
}

function checkSubscribeOptions(options: SubscribeOptions | undefined) {
  const o = knownKeys(options, ["types", "onLost", "onResubscribed"]);
  return {
    types: checkTypes(o.types),
    onLost: callback<() => void>("onLost", o.onLost),
    onResubscribed: callback<() => void>("onResubscribed", o.onResubscribed),
  };
}

/** Event types to deliver, or null for all of them. */
function checkTypes(types: unknown): ReadonlySet<EventType> | null {
  if (types === undefined) return null;
  if (!Array.isArray(types)) {
    throw new InvalidInputError("INVALID_OPTION", "types must be an array of event types");
  }
  for (const type of types) {
    if (!EVENT_TYPES.includes(type as EventType)) {
      throw new InvalidInputError("INVALID_OPTION", `unknown event type ${describe(type)}`);
    }
  }
  return new Set(types as EventType[]);
}
