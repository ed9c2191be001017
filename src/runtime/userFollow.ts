import type { UserStatus } from "../protocol/users.js";
import type { Subscriber } from "./subscriber.js";
import type { UserWatch } from "./userWatch.js";

/** A socket gets at most one `users` frame this often. */
export const USERS_INTERVAL_MS = 100;

/**
 * A socket's live contact list (its `follow-users`): one UserWatch, whose changes go out
 * batched, at most one frame every USERS_INTERVAL_MS, each user's last status only. The first
 * change after a quiet interval goes out on the next turn of the event loop (with whatever
 * arrived in the same turn: a resync's differences, the transitions of one message burst);
 * the changes that follow within the interval wait for its end, together.
 */
export class UserFollow {
  private readonly pending = new Map<string, UserStatus>();
  private timer: NodeJS.Timeout | undefined;
  /** When the last frame went out (performance.now()). */
  private sentAt = -Infinity;

  private constructor(
    private readonly watch: UserWatch,
    private readonly send: (statuses: UserStatus[]) => void,
  ) {
    watch.on("change", (status) => this.changed(status));
  }

  /** Follows `users` (checked, distinct); `send` gets each batch of changes. */
  static async open(
    subscriber: Subscriber,
    users: readonly string[],
    send: (statuses: UserStatus[]) => void,
  ): Promise<UserFollow> {
    return new UserFollow(await subscriber.watchUsers(users), send);
  }

  /** Every followed user's status, in the order asked; the answer counts as a frame sent. */
  answer(): UserStatus[] {
    this.sentAt = performance.now();
    return this.watch.statuses;
  }

  /** The followed users, in the order asked. */
  get users(): string[] {
    return this.watch.statuses.map((status) => status.user);
  }

  /** Stops following: what was waiting is dropped. */
  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
    await this.watch.close();
  }

  private changed(status: UserStatus): void {
    this.pending.set(status.user, status);
    this.timer ??= setTimeout(() => this.flush(), this.wait());
  }

  /** How long until the next frame may go out. */
  private wait(): number {
    return Math.max(0, this.sentAt + USERS_INTERVAL_MS - performance.now());
  }

  private flush(): void {
    // A timer may fire a fraction of a millisecond early: it waits out the rest.
    const wait = this.wait();
    if (wait > 0) {
      this.timer = setTimeout(() => this.flush(), wait);
      return;
    }
    this.timer = undefined;
    this.sentAt = performance.now();
    const statuses = [...this.pending.values()];
    this.pending.clear();
    this.send(statuses);
  }
}
