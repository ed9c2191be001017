import type { Redis } from "ioredis";

/** The baseline's windows, in seconds. */
export const PRESENCE_TTL = 45;
export const TYPING_TTL = 5;

/** What the baseline's pub/sub layer publishes; joins and clean leaves carry the online list. */
export interface NaiveEvent {
  type: "presence.join" | "presence.leave" | "presence.typing";
  conversation_id: string;
  user_id: string;
  timestamp: number;
  online?: string[];
}

/** `time.time()`: this process's clock, in seconds (one of the baseline's defects, kept). */
function time(): number {
  return Date.now() / 1000;
}

/**
 * The naive baseline's `PresenceTracker` (docs/baseline.md), ported call for call: what rollcall
 * is measured against. Its defects stay on purpose: read-then-write join detection, one
 * round trip per command, scores from the caller's clock, a sweep that must be told each
 * conversation. The announcing methods below the port are its WebSocket handler and pub/sub
 * layer, as docs/baseline.md describes them. Only what the bench drives is ported.
 */
export class NaiveTracker {
  constructor(
    readonly redis: Redis,
    readonly presenceTtl = PRESENCE_TTL,
  ) {}

  channel(conversationId: string): string {
    return `presence:${conversationId}:events`;
  }

  presenceKey(conversationId: string): string {
    return `presence:${conversationId}:online`;
  }

  typingKey(conversationId: string): string {
    return `presence:${conversationId}:typing`;
  }

  /** update_presence: ZSCORE, ZADD, EXPIRE, three round trips; true on a join. */
  async updatePresence(conversationId: string, userId: string): Promise<boolean> {
    const key = this.presenceKey(conversationId);
    const now = time();
    const previouslyOnline = await this.redis.zscore(key, userId);
    await this.redis.zadd(key, now, userId);
    await this.redis.expire(key, this.presenceTtl * 3);
    return previouslyOnline === null;
  }

  /** The same three commands in one MULTI/EXEC: one round trip, the same race on joins. */
  async updatePresenceInTransaction(conversationId: string, userId: string): Promise<boolean> {
    const key = this.presenceKey(conversationId);
    const replies = await this.redis
      .multi()
      .zscore(key, userId)
      .zadd(key, time(), userId)
      .expire(key, this.presenceTtl * 3)
      .exec();
    if (!replies) throw new Error("MULTI/EXEC of update_presence was aborted");
    for (const [error] of replies) if (error) throw error;
    return replies[0]![1] === null;
  }

  /** get_online_users: ZRANGEBYSCORE over the presence window. */
  async getOnlineUsers(conversationId: string): Promise<string[]> {
    const cutoff = time() - this.presenceTtl;
    return this.redis.zrangebyscore(this.presenceKey(conversationId), cutoff, "+inf");
  }

  /** remove_presence: ZREM; 1 if the user was there. */
  async removePresence(conversationId: string, userId: string): Promise<number> {
    return this.redis.zrem(this.presenceKey(conversationId), userId);
  }

  /** cleanup_stale: ZRANGEBYSCORE up to the cutoff, then ZREM of what it found. */
  async cleanupStale(conversationId: string): Promise<string[]> {
    const key = this.presenceKey(conversationId);
    const cutoff = time() - this.presenceTtl;
    const stale = await this.redis.zrangebyscore(key, "-inf", cutoff);
    if (stale.length > 0) await this.redis.zrem(key, ...stale);
    return stale;
  }

  /** set_typing(is_typing=True): ZADD, EXPIRE. */
  async setTyping(conversationId: string, userId: string): Promise<void> {
    const key = this.typingKey(conversationId);
    await this.redis.zadd(key, time(), userId);
    await this.redis.expire(key, TYPING_TTL * 3);
  }

  /** The heartbeat frame: update_presence, and a join is announced with the online list. */
  async heartbeat(conversationId: string, userId: string): Promise<boolean> {
    const joined = await this.updatePresence(conversationId, userId);
    if (joined) await this.announceWithRoster("presence.join", conversationId, userId);
    return joined;
  }

  async heartbeatInTransaction(conversationId: string, userId: string): Promise<boolean> {
    const joined = await this.updatePresenceInTransaction(conversationId, userId);
    if (joined) await this.announceWithRoster("presence.join", conversationId, userId);
    return joined;
  }

  /** The handler's `finally`: remove_presence, and the leave goes out with the refreshed list. */
  async disconnect(conversationId: string, userId: string): Promise<boolean> {
    const removed = (await this.removePresence(conversationId, userId)) > 0;
    if (removed) await this.announceWithRoster("presence.leave", conversationId, userId);
    return removed;
  }

  /** A typing frame: set_typing, then the typing event. */
  async typing(conversationId: string, userId: string): Promise<void> {
    await this.setTyping(conversationId, userId);
    await this.publish({ type: "presence.typing", ...this.about(conversationId, userId) });
  }

  /** The periodic task, for one conversation: cleanup_stale, then a leave per stale user. */
  async sweep(conversationId: string): Promise<number> {
    const stale = await this.cleanupStale(conversationId);
    for (const userId of stale) {
      await this.publish({ type: "presence.leave", ...this.about(conversationId, userId) });
    }
    return stale.length;
  }

  private async announceWithRoster(
    type: NaiveEvent["type"],
    conversationId: string,
    userId: string,
  ): Promise<void> {
    const online = await this.getOnlineUsers(conversationId);
    await this.publish({ type, ...this.about(conversationId, userId), online });
  }

  private about(conversationId: string, userId: string) {
    return { conversation_id: conversationId, user_id: userId, timestamp: time() };
  }

  private async publish(event: NaiveEvent): Promise<void> {
    await this.redis.publish(this.channel(event.conversation_id), JSON.stringify(event));
  }
}
