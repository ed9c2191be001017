import type { Roster } from "../engine/scripts/roster.js";
import type { PresenceEvent } from "../protocol/events.js";
import { assemble, type Snapshot } from "../protocol/replica.js";

/** How long the events between a large room's pages may take to arrive before it is read again. */
const ASSEMBLE_WAIT_MS = 500;
/** Reads of a room this close together are a burst (sockets coming back after a gateway died). */
const BURST_MS = 100;
/** In a burst, a read waits this long for more callers to share it. */
const GATHER_MS = 20;
/** Reads of a room that changes too fast to assemble before giving up (the caller's join fails). */
const ATTEMPTS = 5;

/**
 * One room's snapshot reads on a gateway, shared. A read asked for while none is waiting to start
 * waits for the one under way (if any), then a turn of the event loop, then starts: every caller
 * that asks meanwhile gets the same one. So each caller's snapshot is read after it asked (what
 * its own join did is in it), and sockets that join a room together cost one read or two, not
 * one each. In a burst (a read started less than BURST_MS before), a read waits GATHER_MS for
 * more callers: the sockets of a reconnect storm, spread out by their backoff's jitter, share a
 * read per GATHER_MS rather than one each. A room past `rosterLimit` is read in pages (rosterPages) and
 * assembled with the events its subscription passed meanwhile.
 */
export class SharedSnapshot {
  /** The read waiting to start, which callers share. */
  private queued: Promise<Snapshot> | null = null;
  /** The read under way, or the last one (settled). */
  private running: Promise<unknown> = Promise.resolve();
  /** The room's events while a read of several pages is under way. */
  private recorded: PresenceEvent[] | null = null;
  private arrived: (() => void) | null = null;
  private startedAt = -Infinity;

  constructor(
    private readonly read: () => Promise<Roster[]>,
    /** A read was made, of so many pages. */
    private readonly counted: (pages: number) => void,
  ) {}

  /** Every event of the room as it comes: kept while a read needs them to assemble pages. */
  see(event: PresenceEvent): void {
    if (this.recorded === null) return;
    this.recorded.push(event);
    this.arrived?.();
  }

  /** A snapshot read after this call, shared with every caller until it starts. */
  next(): Promise<Snapshot> {
    if (this.queued) return this.queued;
    const read = this.running
      .then(
        () =>
          new Promise((resolve) => {
            if (performance.now() - this.startedAt < BURST_MS) setTimeout(resolve, GATHER_MS);
            else setImmediate(resolve);
          }),
      )
      .then(() => {
        this.queued = null;
        this.startedAt = performance.now();
        return this.take();
      });
    this.queued = read;
    this.running = read.catch(() => undefined);
    return read;
  }

  private async take(): Promise<Snapshot> {
    this.recorded = [];
    try {
      for (let attempt = 1; ; attempt++) {
        const pages = (await this.read()).map(snapshotOf);
        this.counted(pages.length);
        if (pages.length === 1) return pages[0]!;
        const whole = await this.assembled(pages);
        if (whole) return whole;
        if (attempt === ATTEMPTS) throw new Error("the room changed too fast to read it whole");
      }
    } finally {
      this.recorded = null;
    }
  }

  /** The pages and the events between them, which may still be on their way: waited for a bit. */
  private async assembled(pages: Snapshot[]): Promise<Snapshot | null> {
    const deadline = performance.now() + ASSEMBLE_WAIT_MS;
    for (;;) {
      const whole = assemble(pages, this.recorded ?? []);
      const left = deadline - performance.now();
      if (whole || left <= 0) return whole;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.arrived = resolve;
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
      this.arrived = null;
    }
  }
}

/** Snapshots' JSON, encoded once for every socket that gets one (a large room's is large). */
const encoded = new WeakMap<Snapshot, string>();
/** And the whole frame's bytes, for the sockets that get it without a ref (a resync's). */
const framed = new WeakMap<Snapshot, Buffer>();

/** A snapshot frame: the roster encoded once, however many sockets get it. */
export function snapshotFrame(snapshot: Snapshot, ref: string | undefined): string | Buffer {
  let bytes = ref === undefined ? framed.get(snapshot) : undefined;
  if (bytes) return bytes;
  let roster = encoded.get(snapshot);
  if (roster === undefined) encoded.set(snapshot, (roster = JSON.stringify(snapshot)));
  const tail = ref === undefined ? "" : `,"ref":${JSON.stringify(ref)}`;
  const text = `{"type":"snapshot","room":${JSON.stringify(snapshot.room)},"roster":${roster}${tail}}`;
  if (ref !== undefined) return text;
  framed.set(snapshot, (bytes = Buffer.from(text)));
  return bytes;
}

/** What a socket's replica needs of a roster: no connections, no lastSeen. */
export function snapshotOf(roster: Roster): Snapshot {
  const members = roster.members.map(({ user, joinedAt, state }) => ({ user, joinedAt, state }));
  const { room, epoch, seq, count, typing, log } = roster;
  return { room, epoch, seq, count, members, typing, ...(log === undefined ? {} : { log }) };
}
