import { RollcallError } from "../protocol/errors.js";
import { encodeState, type JsonValue, type MemberState } from "../protocol/state.js";

/** Awareness client ids one member state lists at most (a provider has one per document). */
export const MAX_CLIENTS = 16;
/** The least maxStateBytes the mirror works with: MAX_CLIENTS ids of 32 bits, and some room. */
export const MIN_STATE_BYTES = 256;

/**
 * A member's state as mirrored from awareness: the awareness client ids of its connections (so
 * that other instances can remove them when the member leaves), and a subset of its awareness
 * state.
 */
export interface MirroredState extends MemberState {
  clients: number[];
  awareness: { [field: string]: JsonValue };
}

/**
 * The member state of some awareness clients: their ids, and as many of the top-level fields of
 * `awareness` (in key order) as fit within `maxBytes`. A field JSON cannot carry, or that would
 * not fit, is left out; a cursor that moves leaves the rest of the state as it was.
 */
export function mirroredState(
  clients: Iterable<number>,
  awareness: Record<string, unknown> | null,
  maxBytes: number,
): MirroredState {
  const state: MirroredState = {
    clients: [...clients].filter(isClientId).slice(0, MAX_CLIENTS),
    awareness: {},
  };
  encodeState(state, maxBytes); // the ids alone fit in MIN_STATE_BYTES
  for (const field of Object.keys(awareness ?? {}).sort()) {
    state.awareness[field] = awareness![field] as JsonValue;
    try {
      encodeState(state, maxBytes);
    } catch (error) {
      if (!(error instanceof RollcallError)) throw error;
      delete state.awareness[field];
    }
  }
  return state;
}

/** The awareness client ids a member state lists: none when it was not mirrored. */
export function clientsOf(state: MemberState | null | undefined): number[] {
  const clients = state?.clients;
  return Array.isArray(clients) ? clients.filter(isClientId) : [];
}

function isClientId(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/**
 * At most one send per key and interval: the first change of a key is sent at once, changes
 * within the interval that follows once at its end (the sender reads the latest then).
 */
export class Throttle<K> {
  /** Keys sent within the last interval, and whether a change waits for its end. */
  private readonly cooling = new Map<K, { timer: NodeJS.Timeout; waiting: boolean }>();

  constructor(
    private readonly intervalMs: number,
    private readonly send: (key: K) => void,
  ) {}

  changed(key: K): void {
    const cooling = this.cooling.get(key);
    if (cooling) cooling.waiting = true;
    else this.fire(key);
  }

  /** Forgets a key: a change waiting for it is dropped. */
  forget(key: K): void {
    clearTimeout(this.cooling.get(key)?.timer);
    this.cooling.delete(key);
  }

  clear(): void {
    for (const key of [...this.cooling.keys()]) this.forget(key);
  }

  private fire(key: K): void {
    const timer = setTimeout(() => {
      const waiting = this.cooling.get(key)?.waiting;
      this.cooling.delete(key);
      if (waiting) this.fire(key);
    }, this.intervalMs);
    timer.unref();
    this.cooling.set(key, { timer, waiting: false });
    this.send(key);
  }
}
