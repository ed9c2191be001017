import { UnexpectedReplyError } from "./errors.js";

/** Whether a user is online anywhere in the deployment, and since or until when. */
export interface UserStatus {
  user: string;
  /** The user holds a visible live connection in some room (a leave grace included). */
  online: boolean;
  /** When the current online period began (Redis time, ms); null while offline. */
  since: number | null;
  /**
   * When the user's last online period ended (Redis time, ms): their last live connection
   * anywhere closed, or expired. Null for a user never seen, or not seen within the retention.
   * While online, the end of the period before.
   */
  lastSeenAt: number | null;
}

/**
 * A user went online or offline: what a bucket's users channel carries, in its own chain of
 * `seq` and `prev` per epoch (every user of the bucket shares it), as events do per room.
 */
export type StatusChange = {
  v: 2;
  user: string;
  /** Redis time of the transition's publication, ms. */
  at: number;
  epoch: string;
  seq: number;
  prev: number;
} & ({ type: "online"; since: number } | { type: "offline"; lastSeenAt: number });

const isCount = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0;

/** A users channel message (its signature already checked and removed), checked field by field. */
export function parseStatusChange(json: string): StatusChange {
  let change: Record<string, unknown>;
  try {
    change = JSON.parse(json) as Record<string, unknown>;
  } catch {
    throw new UnexpectedReplyError("status change", json);
  }
  const { v, type, user, at, epoch, seq, prev } = change;
  const time = type === "online" ? change.since : change.lastSeenAt;
  const valid =
    v === 2 &&
    (type === "online" || type === "offline") &&
    typeof user === "string" &&
    typeof epoch === "string" &&
    [at, seq, prev, time].every(isCount);
  if (!valid) throw new UnexpectedReplyError("status change", json);
  return change as StatusChange;
}

/** A user's status once `change` applied to what it was (`before`, if known). */
export function statusAfter(change: StatusChange, before?: UserStatus): UserStatus {
  return change.type === "online"
    ? {
        user: change.user,
        online: true,
        since: change.since,
        lastSeenAt: before?.lastSeenAt ?? null,
      }
    : {
        user: change.user,
        online: false,
        since: null,
        lastSeenAt: change.lastSeenAt > 0 ? change.lastSeenAt : null,
      };
}
