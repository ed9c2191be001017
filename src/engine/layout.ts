import { createHash } from "node:crypto";

/** FNV-1a over the UTF-8 bytes: stable across processes and versions, cheap, well spread. */
export function bucketOf(room: string, buckets: number): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(room)) {
    hash = Math.imul(hash ^ byte, 0x01000193);
  }
  return (hash >>> 0) % buckets;
}

/** How many rooms' keys, or connections' ids, a Layout keeps at hand before it starts over (and
 * how many rooms' sizes a Rollcall). */
export const KEPT = 10_000;

/** A value made once for a key seen recently: calls name the same rooms and connections again
 * and again (a gateway heartbeats each socket's rooms every few seconds). */
function kept<V>(cache: Map<string, V>, key: string, make: (key: string) => V): V {
  let value = cache.get(key);
  if (value === undefined) {
    if (cache.size >= KEPT) cache.clear();
    cache.set(key, (value = make(key)));
  }
  return value;
}

/** The keys and channel of one room; every one carries its bucket's hash tag. */
export interface RoomKeys {
  readonly bucket: number;
  /** The room's own keys (the scripts derive them), then its bucket's. */
  readonly keys: readonly [room: string, index: string, due: string, seq: string, log: string];
  readonly channelPrefix: string;
  readonly channel: string;
}

/** How many calls of an instance keep their replies in one string per bucket (include/replay.lua). */
export const REPLAY_GENERATION = 1_024;

/**
 * Where everything lives in Redis, built in this one place. Bucket b's keys and its rooms' keys
 * share the hash tag `{prefix:b}`, so every call touches one slot, on a Cluster too.
 */
export class Layout {
  constructor(
    readonly prefix: string,
    readonly buckets: number,
  ) {}

  tag(bucket: number): string {
    return `{${this.prefix}:${bucket}}`;
  }

  private readonly rooms = new Map<string, RoomKeys>();
  private readonly connections = new Map<string, string | Buffer>();
  private readonly bucketKeyLists: (readonly [due: string, seq: string, log: string])[] = [];

  room(room: string): RoomKeys {
    return kept(this.rooms, room, (r) => this.roomKeys(r));
  }

  /** A connection id as records store it (see connectionKey). */
  connection(connection: string): string | Buffer {
    return kept(this.connections, connection, connectionKey);
  }

  private roomKeys(room: string): RoomKeys {
    const bucket = bucketOf(room, this.buckets);
    const tag = this.tag(bucket);
    const channelPrefix = `${tag}:room:`;
    return {
      bucket,
      keys: [
        `${tag}:u:${room}`,
        `${tag}:z:${room}`,
        this.due(bucket),
        this.seq(bucket),
        this.log(bucket),
      ],
      channelPrefix,
      channel: channelPrefix + room,
    };
  }

  /** The hash of shard k of a big room's records (lua/include/shards.lua). */
  shard(room: string, k: number): string {
    return `${this.tag(this.room(room).bucket)}:s${k}:${room}`;
  }

  /** KEYS[1..3] of every bucket script (include/bucket.lua): due, seq, log. */
  bucketKeys(bucket: number): readonly [due: string, seq: string, log: string] {
    return (this.bucketKeyLists[bucket] ??= [this.due(bucket), this.seq(bucket), this.log(bucket)]);
  }

  /** The bucket's rooms with something due, by their next deadline. */
  due(bucket: number): string {
    return `${this.tag(bucket)}:due`;
  }

  /** The bucket's event counter, its epoch and the Redis process that owns it. */
  seq(bucket: number): string {
    return `${this.tag(bucket)}:seq`;
  }

  /** The bucket's event log (a stream), when the log is on. */
  log(bucket: number): string {
    return `${this.tag(bucket)}:log`;
  }

  /** Where the replies of a generation of an instance's calls are kept for their resends. */
  replay(bucket: number, instance: string, generation: number): string {
    return `${this.tag(bucket)}:r:${instance}:${generation.toString(36)}`;
  }

  /** The bucket a user's status lives in (users and rooms share the buckets and their tags). */
  userBucket(user: string): number {
    return bucketOf(user, this.buckets);
  }

  /** A user's status: a string (see lua/users-3.lua); the rooms they are in are at `:q:`. */
  userStatus(user: string): string {
    return `${this.tag(this.userBucket(user))}:p:${user}`;
  }

  /** The bucket's user changes (a stream): its rooms' visible joins and leaves, to apply. */
  userChanges(bucket: number): string {
    return `${this.tag(bucket)}:ux`;
  }

  /** The channel of the bucket's users' status transitions (sharded, in the bucket's slot). */
  usersChannel(bucket: number): string {
    return `${this.tag(bucket)}:users`;
  }

  /** The settings every instance of the deployment must share. */
  get deployment(): string {
    return `${this.prefix}:deployment`;
  }
}

/**
 * A connection id as records store it: verbatim up to 8 bytes, otherwise the first 9 bytes of
 * its SHA-256 (9 bytes: never equal to a verbatim id, so short ids stay exact). Keeps a record of
 * two UUID connections and a small state within Redis's compact encoding (64 bytes).
 */
export function connectionKey(connection: string): string | Buffer {
  const bytes = Buffer.from(connection);
  if (bytes.length <= 8) return connection;
  return createHash("sha256").update(bytes).digest().subarray(0, 9);
}
