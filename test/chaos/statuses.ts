/**
 * The users' status in a chaos run: a subscriber of every room's channel and every bucket's
 * users channel on one connection (so that it sees transitions and room events in the order
 * Redis published them), and the status the run settles on.
 */
import type { Redis } from "ioredis";
import { parseEvent, type Rollcall } from "../../src/index.js";
import { parseStatusChange } from "../../src/protocol/users.js";
import type { SettledEnd, Sighting } from "../kit/invariants.js";
import { codeOf, Tally } from "./observers.js";

export class StatusFollower {
  /** What it heard, in order, and where its connection closed (checkStatus). */
  readonly sightings: Sighting[] = [];
  /** Messages it could not read, by code. */
  readonly errors = new Tally();
  /** Each bucket's last transition heard: its seq. */
  private readonly heardSeq = new Map<number, number>();
  /** The users channels, to their buckets. */
  private readonly buckets = new Map<string, number>();
  private following = false;

  /** `redis`: a connection of its own, given over to subscriptions. */
  constructor(
    private readonly rc: Rollcall,
    private readonly redis: Redis,
    private readonly rooms: readonly string[],
  ) {
    for (let bucket = 0; bucket < rc.settings.buckets; bucket++) {
      this.buckets.set(rc.usersChannel(bucket), bucket);
    }
  }

  /** Subscribed to every channel; ioredis subscribes again after each reconnection. */
  async start(): Promise<void> {
    this.redis.on("smessage", (channel: string, message: string) => this.heard(channel, message));
    // Every message received before the close came first: what follows it may have missed some.
    this.redis.on("close", () => {
      if (this.following) this.sightings.push({ kind: "lost" });
    });
    const channels = [...this.rooms.map((room) => this.rc.layout.room(room).channel)];
    for (const channel of [...channels, ...this.buckets.keys()]) {
      await this.redis.ssubscribe(channel);
    }
    this.following = true;
  }

  stop(): void {
    this.following = false;
    this.redis.disconnect();
  }

  /** The users channels whose last transition (the bucket's counter as Redis has it) it has
   * not heard, each described. */
  async behind(): Promise<string[]> {
    const behind: string[] = [];
    for (const [channel, bucket] of this.buckets) {
      const { seq } = await this.rc.statusSnapshot(bucket, []);
      const heard = this.heardSeq.get(bucket) ?? 0;
      // 0: no transition since the data began (a restart without persistence lost the rest).
      if (seq !== 0 && seq !== heard)
        behind.push(`${channel} heard up to #${heard}, Redis at #${seq}`);
    }
    return behind;
  }

  /** Null once it heard every bucket's last transition. */
  async caughtUp(): Promise<string | null> {
    const behind = await this.behind();
    return behind.length === 0 ? null : behind.join("; ");
  }

  private heard(channel: string, message: string): void {
    if (!this.following) return;
    const bucket = this.buckets.get(channel);
    try {
      if (bucket === undefined) {
        this.sightings.push({ kind: "event", event: parseEvent(message) });
      } else {
        const change = parseStatusChange(message);
        this.sightings.push({ kind: "status", bucket, change });
        this.heardSeq.set(bucket, change.seq);
      }
    } catch (error) {
      this.errors.add(codeOf(error));
    }
  }
}

/** Every user's status() and the users the rooms' rosters list, read now. */
export async function statusEnd(
  rc: Rollcall,
  rooms: readonly string[],
  users: readonly string[],
): Promise<SettledEnd> {
  const rostered = new Set<string>();
  for (const room of rooms) {
    for (const page of await rc.rosterPages(room))
      page.members.forEach((m) => rostered.add(m.user));
  }
  return {
    statuses: await rc.status(users),
    rostered,
    userBucket: (user) => rc.userBucket(user),
  };
}

/** Null once every user's status() says online iff some roster lists them. */
export async function statusSettled(
  rc: Rollcall,
  rooms: readonly string[],
  users: readonly string[],
): Promise<string | null> {
  const { statuses, rostered } = await statusEnd(rc, rooms, users);
  const off = statuses.filter((s) => s.online !== rostered.has(s.user)).map((s) => s.user);
  return off.length === 0 ? null : `status() disagrees with the rosters on ${off.join(", ")}`;
}
