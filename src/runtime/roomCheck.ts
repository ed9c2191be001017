import type { RoomMark } from "../engine/roomMark.js";
import type { ReplicaRoster } from "../protocol/replica.js";

/** How often a replica is checked against Redis (±20 %), and how soon a difference is confirmed. */
export const CHECK_MS = 5_000;
export const CONFIRM_MS = 1_000;

const jittered = () => CHECK_MS * (0.8 + 0.4 * Math.random());

/** What a replica says of its room: where its events stand, and the members it holds. */
type Claim = Pick<ReplicaRoster, "epoch" | "seq" | "count"> & { members: number };

function claimOf(roster: ReplicaRoster): Claim {
  const { epoch, seq, count, members } = roster;
  return { epoch, seq, count, members: members.length };
}

const same = (a: Claim, b: Claim) =>
  a.epoch === b.epoch && a.seq === b.seq && a.count === b.count && a.members === b.members;

/**
 * Whether Redis agrees with a replica: the same epoch, seq, count and number of members, or,
 * for a room Redis holds nothing of, no member either (its seq is then the bucket's counter,
 * which other rooms move).
 */
function agrees(stored: RoomMark, claim: Claim): boolean {
  if (stored.count === 0 && stored.records === 0) return claim.count === 0 && claim.members === 0;
  return (
    stored.epoch === claim.epoch &&
    stored.seq === claim.seq &&
    stored.count === claim.count &&
    stored.records === claim.members
  );
}

/**
 * Checks a synced replica against its room in Redis, cheaply (Rollcall.mark: no member read):
 * what events cannot tell, such as keys evicted or expired while nothing was published, so that
 * a replica never stays synced on members Redis no longer has. A difference is confirmed once,
 * CONFIRM_MS later, with the replica unmoved (an event in flight is no difference), then
 * `differs` is called: the owner takes a snapshot. A read during which the replica moved proves
 * nothing and is dropped. So a replica learns of a loss within CHECK_MS × 1.2 + CONFIRM_MS plus
 * two reads and a snapshot.
 */
export class RoomCheck {
  private timer: NodeJS.Timeout | undefined;
  /** The replica's claim when Redis was last found to differ from it. */
  private doubted: Claim | null = null;
  private stopped = false;

  constructor(
    private readonly read: () => Promise<RoomMark>,
    /** The replica's roster while it claims to be synced, else null (nothing to check). */
    private readonly synced: () => ReplicaRoster | null,
    private readonly differs: () => void,
    private readonly report: (error: unknown) => void,
  ) {}

  start(): void {
    this.schedule(jittered());
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.check(), ms);
    this.timer.unref();
  }

  private async check(): Promise<void> {
    let next = jittered();
    try {
      const roster = this.synced();
      const before = roster && claimOf(roster);
      const stored = before && (await this.read());
      const after = this.synced();
      const unmoved = before && stored && after && same(before, claimOf(after));
      if (!unmoved || agrees(stored, before)) {
        this.doubted = null;
      } else if (this.doubted && same(this.doubted, before)) {
        this.doubted = null;
        this.differs();
      } else {
        this.doubted = before;
        next = CONFIRM_MS;
      }
    } catch (error) {
      this.report(error);
    }
    this.schedule(next);
  }
}
