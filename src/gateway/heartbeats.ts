/**
 * Heartbeats every (socket, room) pair once per interval from a single timer: pairs are spread
 * over slots, one slot per tick, so 10,000 sockets are not 10,000 timers and their calls do not
 * all land on Redis in the same millisecond.
 */
export class HeartbeatWheel<T> {
  private readonly slots: Set<T>[];
  private readonly where = new Map<T, number>();
  private next = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly beat: (entry: T) => void,
    slotCount = 20,
  ) {
    this.slots = Array.from({ length: slotCount }, () => new Set<T>());
  }

  get size(): number {
    return this.where.size;
  }

  /** Adds an entry that has just beaten: its slot is the one a full interval away. */
  add(entry: T): void {
    this.remove(entry);
    const slot = (this.next + this.slots.length - 1) % this.slots.length;
    this.slots[slot]!.add(entry);
    this.where.set(entry, slot);
  }

  remove(entry: T): void {
    const slot = this.where.get(entry);
    if (slot === undefined) return;
    this.slots[slot]!.delete(entry);
    this.where.delete(entry);
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.intervalMs / this.slots.length);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const slot = this.slots[this.next]!;
    this.next = (this.next + 1) % this.slots.length;
    for (const entry of slot) this.beat(entry);
  }
}
