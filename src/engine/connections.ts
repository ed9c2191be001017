import type { Cluster, Redis } from "ioredis";
import type { Client } from "./script.js";

/**
 * A connection of its own for a subscriber, since a subscribed connection is no place for the
 * engine's calls. After a reconnect rollcall subscribes every room again itself and waits for
 * Redis to confirm, so that it knows when a snapshot is safe; standalone, ioredis's own
 * re-subscribing is off. A Cluster needs `shardedSubscribers` for sharded pub/sub: one
 * subscriber connection per shard.
 */
export function subscriberConnection(client: Client): Client {
  // isCluster, never instanceof: a second copy of ioredis in the app would make that false.
  // A periodic refresh of the slots: ioredis 6 has none by default, and a subscriber whose
  // channels a failover moved must learn it even if the refresh that followed saw the old map.
  if (client.isCluster) {
    return (client as Cluster).duplicate([], {
      shardedSubscribers: true,
      slotsRefreshInterval: 1_000,
    });
  }
  return (client as Redis).duplicate({ autoResubscribe: false });
}

/** A connection of its own, for reads the application's calls must never wait behind. */
export function dedicatedConnection(client: Client): Client {
  return client.isCluster ? (client as Cluster).duplicate() : (client as Redis).duplicate();
}
