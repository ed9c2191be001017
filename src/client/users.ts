import type { ServerFrame } from "../protocol/frames.js";
import type { UserStatus } from "../protocol/users.js";
import { Emitter } from "./emitter.js";
import { GatewayError, type Link } from "./link.js";

interface UserListEvents extends Record<string, unknown[]> {
  /** A followed user's status changed (as it now is); read `statuses` for every user's. */
  change: [status: UserStatus];
  /** The gateway refused the list when it was followed again after a reconnect: it is over. */
  error: [error: GatewayError];
}

const same = (a: UserStatus | undefined, b: UserStatus): boolean =>
  a?.online === b.online && a.since === b.since && a.lastSeenAt === b.lastSeenAt;

/**
 * A live contact list (protocol version 2): whether each followed user is online anywhere in the
 * deployment, since when, and when they were last seen. The gateway answers with every user's
 * status, then sends the statuses that change. Followed again after a reconnect: what changed
 * meanwhile is told as changes.
 */
export class UserList extends Emitter<UserListEvents> {
  /** Settles with the gateway's answer, or fails if it refuses the list. */
  readonly ready: Promise<void>;
  /** The users followed, each once, in the order asked. */
  readonly users: readonly string[];
  private current = new Map<string, UserStatus>();
  private refused: readonly string[] = [];
  /** Until the answer to its last follow-users: frames before it are an older list's. */
  private answered = false;
  /** An answer came before: the next one (after a reconnect) is told as changes. */
  private installed = false;
  private ended = false;
  private resolveReady!: () => void;
  private rejectReady!: (error: GatewayError) => void;

  /** @internal Made by RollcallClient.followUsers(). */
  constructor(
    private readonly client: Link,
    users: readonly string[],
  ) {
    super();
    this.users = [...new Set(users)];
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined); // a refusal also reaches 'error' listeners
  }

  /** Every followed user's status, in the order asked (the users denied are not among them). */
  get statuses(): UserStatus[] {
    return [...this.current.values()];
  }

  /** A followed user's status; undefined for a user not followed, or denied. */
  status(user: string): UserStatus | undefined {
    return this.current.get(user);
  }

  /** The users the gateway would not let this client follow (its `authorizeUsers` hook). */
  get denied(): readonly string[] {
    return this.refused;
  }

  /** Stops following. */
  async close(): Promise<void> {
    if (this.ended) return;
    this.end(new GatewayError("CLOSED", "the list was closed"));
    // A list replaced by a later one leaves the gateway's follow to that one.
    if (!this.client.forgetUsers(this)) return;
    await this.client.send({ type: "unfollow-users" }, true).catch(() => undefined);
  }

  /** @internal (Re)follows on the socket: the gateway answers with every user's status. */
  refollow(): void {
    this.answered = false;
    const frame = { type: "follow-users" as const, users: [...this.users] };
    this.client
      .ask(frame, (reply) => {
        if (reply.type === "users") this.install(reply);
      })
      .catch((error: GatewayError) => {
        if (error.code !== "CLOSED") this.refuse(error); // CLOSED: the reconnect follows again
      });
  }

  /** @internal A batch of changes (a `users` frame that answers no request). */
  receive(statuses: readonly UserStatus[]): void {
    if (this.ended || !this.answered) return;
    for (const status of statuses) {
      const before = this.current.get(status.user);
      if (before === undefined) continue; // not followed (a frame of an older list)
      this.current.set(status.user, status);
      if (!same(before, status)) this.emit("change", status);
    }
  }

  /** @internal No answer will come (the client closed, or a later list replaced this one). */
  end(error: GatewayError): void {
    this.ended = true;
    this.rejectReady(error);
  }

  /** The gateway's answer: every user's status; after a reconnect, the differences are told. */
  private install(answer: Extract<ServerFrame, { type: "users" }>): void {
    if (this.ended) return;
    const before = this.current;
    this.current = new Map();
    for (const status of answer.statuses) this.current.set(status.user, status);
    this.refused = answer.denied ?? [];
    this.answered = true;
    this.resolveReady();
    if (!this.installed) {
      this.installed = true;
      return;
    }
    for (const status of answer.statuses) {
      if (!same(before.get(status.user), status)) this.emit("change", status);
    }
  }

  private refuse(error: GatewayError): void {
    this.end(error);
    this.client.forgetUsers(this);
    this.emit("error", error);
  }
}
