import type { CeilingConfig } from "./ceiling.js";

/** How much of everything to run: `full` for the committed results, `smoke` to prove it runs. */
export interface Profile {
  name: "full" | "smoke";
  /** Users already present, one connection each: the steady state heartbeats measure. */
  population: { rooms: number; usersPerRoom: number };
  /** Sequential heartbeats per variant, taken in rounds that alternate the variants. */
  latency: { samples: number; rounds: number; warmup: number };
  throughput: {
    /** Heartbeats kept in flight, spread over this many connections (instances). */
    levels: { inFlight: number; connections: number }[];
    autoPipelining: boolean[];
    runMs: number;
    /** Each configuration runs this many times; the best run counts (noise only slows). */
    repeats: number;
  };
  commands: { heartbeats: number };
  /** redis-benchmark runs of the heartbeat script over `users` present users, after each
   * throughput repeat. */
  ceiling: { users: number; runs: CeilingConfig[] };
  fanout: { samples: number; rooms: number };
  sweep: {
    expirations: number;
    roomSize: number;
    /** "default": the Sweeper's own default. */
    batches: (number | "default")[];
    /** Live rooms with nothing due: the first with every batch, the others at the default. */
    idleRooms: number[];
    /** Timed passes per scenario; the median one is reported. */
    passes: number;
  };
  leave: { connections: number; roomSize: number; intervalMs: number };
  memory: { connections: number; roomSizes: number[] };
}

export const FULL: Profile = {
  name: "full",
  population: { rooms: 1_000, usersPerRoom: 10 },
  latency: { samples: 20_000, rounds: 10, warmup: 500 },
  throughput: {
    levels: [
      { inFlight: 1, connections: 1 },
      { inFlight: 8, connections: 1 },
      { inFlight: 64, connections: 1 },
      { inFlight: 256, connections: 4 },
    ],
    autoPipelining: [false, true],
    runMs: 1_500,
    repeats: 3,
  },
  commands: { heartbeats: 2_000 },
  ceiling: {
    users: 10_000,
    runs: [
      { clients: 1, pipeline: 1, requests: 10_000 },
      { clients: 50, pipeline: 1, requests: 50_000 },
      { clients: 50, pipeline: 16, requests: 200_000 },
    ],
  },
  fanout: { samples: 2_000, rooms: 20 },
  sweep: {
    expirations: 20_000,
    roomSize: 5,
    batches: ["default", 10, 100, 1_000],
    idleRooms: [1_000, 100_000],
    passes: 3,
  },
  leave: { connections: 2_000, roomSize: 5, intervalMs: 1_000 },
  memory: { connections: 20_000, roomSizes: [5, 20, 128, 1_000] },
};

export const SMOKE: Profile = {
  name: "smoke",
  population: { rooms: 50, usersPerRoom: 10 },
  latency: { samples: 300, rounds: 3, warmup: 20 },
  throughput: {
    ...FULL.throughput,
    runMs: 100,
    repeats: 1,
  },
  commands: { heartbeats: 100 },
  ceiling: {
    users: 100,
    runs: [
      { clients: 1, pipeline: 1, requests: 500 },
      { clients: 10, pipeline: 16, requests: 2_000 },
    ],
  },
  fanout: { samples: 30, rooms: 5 },
  sweep: {
    expirations: 300,
    roomSize: 5,
    batches: ["default", 10],
    idleRooms: [100, 2_000],
    passes: 1,
  },
  leave: { connections: 100, roomSize: 5, intervalMs: 250 },
  memory: { connections: 1_000, roomSizes: [5, 20, 128, 1_000] },
};
