import { carriesCount, type PresenceEvent } from "../protocol/events.js";

/**
 * The sockets that watch one room's member count without joining it or hearing its events, and
 * the count frames they get: one when a socket starts watching, then one when the count changed,
 * at most every `intervalMs` (the latest count then). The count comes from the room's join and
 * leave events (each carries the room's count after it), the newest by number, or from a read
 * when none has come yet.
 */
export class CountWatch<S> {
  /** Each watching socket, and the count it was sent last. */
  readonly watchers = new Map<S, number | null>();
  private current: number | null = null;
  private epoch = "";
  private seq = -1;
  /** Events counted so far: a read's answer is taken only if none came while it was under way. */
  private seen = 0;
  private sentAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly send: (to: S, count: number) => void,
    private readonly intervalMs: number,
  ) {}

  /** The room's count, when an event or a read has told it. */
  get count(): number | null {
    return this.current;
  }

  /** An event of the room as it came (in any order): a join's or leave's count, if newer. */
  see(event: PresenceEvent): void {
    if (!carriesCount(event)) return;
    if (event.epoch === this.epoch && event.seq <= this.seq) return;
    this.epoch = event.epoch;
    this.seq = event.seq;
    this.seen += 1;
    this.set(event.count);
  }

  /** Where a read starts: pass it to `read` with its answer. */
  get mark(): number {
    return this.seen;
  }

  /** A count read from Redis, started at `mark`: an event that came meanwhile knows better. */
  read(count: number, mark: number): void {
    if (this.seen === mark) this.set(count);
  }

  /** A socket watches: it gets the count on its own (the watch frame's answer), then `sent`. */
  add(to: S): void {
    if (!this.watchers.has(to)) this.watchers.set(to, null);
  }

  /** A watcher was sent a count (its watch frame's answer). */
  sent(to: S, count: number): void {
    if (!this.watchers.has(to)) return;
    this.watchers.set(to, count);
    // The count moved while the answer was on its way: the next frame tells it.
    if (count !== this.current && this.current !== null) this.set(this.current);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private set(count: number): void {
    this.current = count;
    if (this.watchers.size === 0 || this.timer !== undefined) return;
    const wait = Math.max(0, this.sentAt + this.intervalMs - performance.now());
    this.timer = setTimeout(() => this.flush(), wait);
  }

  private flush(): void {
    this.timer = undefined;
    const count = this.current;
    if (count === null) return;
    let sent = false;
    for (const [to, last] of this.watchers) {
      if (last === count || last === null) continue; // null: its answer is on its way
      this.watchers.set(to, count);
      this.send(to, count);
      sent = true;
    }
    if (sent) this.sentAt = performance.now();
  }
}
