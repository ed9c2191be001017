/** A seeded PRNG (mulberry32): the same seed draws the same run, so a failing run can be replayed. */
export class Random {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("nothing to pick from");
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A key of `weights`, drawn in proportion to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    let x = this.next() * entries.reduce((sum, [, w]) => sum + w, 0);
    for (const [key, weight] of entries) {
      x -= weight;
      if (x < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }

  /** A seed for another generator, drawn from this one. */
  fork(): Random {
    return new Random(Math.floor(this.next() * 4_294_967_296));
  }
}

/** A fresh seed when none is given. */
export function newSeed(): number {
  return Math.floor(Math.random() * 4_294_967_296);
}
