import type { BenchmarkConfig } from "./benchmark.js";
import type { BigRoomsProfile } from "./bigRooms.js";
import type { CeilingConfig } from "./ceiling.js";
import type { LogProfile } from "./eventLog.js";
import type { GatewayProfile } from "./gateway.js";
import type { GraceProfile } from "./grace.js";
import type { ScriptsProfile } from "./scripts.js";

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
  /** redis-benchmark runs of each script over R rooms of R users, after each throughput repeat. */
  ceiling: CeilingConfig;
  fanout: { samples: number; rooms: number };
  /** Every sweep runs at the Sweeper's default batch. */
  sweep: {
    expirations: number;
    /**
     * Sizes of the rooms whose members expire: the first among every count of idle rooms (and
     * the baseline's), the others among the first count. Big rooms fill the batch.
     */
    roomSizes: number[];
    /** Live rooms with nothing due. */
    idleRooms: number[];
    /** Timed passes per scenario; the median one is reported. */
    passes: number;
  };
  leave: { connections: number; roomSize: number; intervalMs: number };
  /**
   * Live rooms (nothing due; members beat every `heartbeatMs`, window `presenceWindowMs`): Redis
   * CPU with a Sweeper and without, in alternating segments of `segmentMs`, `repeats` of each.
   */
  live: {
    roomSizes: number[];
    connections: number;
    presenceWindowMs: number;
    heartbeatMs: number;
    segmentMs: number;
    repeats: number;
    /** redis-benchmark of the alternative (a ZSCORE per heartbeat), runs of each script. */
    alternative: BenchmarkConfig & { repeats: number };
  };
  /** Users per cell (past the compact encodings), and joins whose kept replies are weighed. */
  memory: { users: number; roomSizes: number[]; replayJoins: number };
  /** `rollcall stats` over this many connections in rooms of `roomSize`, `runs` times. */
  counts: { connections: number; roomSize: number; runs: number };
  /** Full roster reads of rooms of each size; roster() beside ZRANGE of `compareMembers`. */
  roster: { roomSizes: number[]; reads: number; compareMembers: number; samples: number };
  /** Gateway processes: sockets held, fan-out across two instances, heartbeat frames. */
  gateway: GatewayProfile;
  /** Large rooms under churn, and a reconnect storm (run alone: --only big-rooms). */
  bigRooms: BigRoomsProfile;
  /** The event log's cost per event, on against off. */
  log: LogProfile;
  /** The leave grace and room capacity on the heartbeat path. */
  grace: GraceProfile;
  /** Each script's Redis time on its paths, beside its definitions alone. */
  scripts: ScriptsProfile;
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
  ceiling: { roomSizes: [5, 20, 128], clients: 50, pipeline: 16, requests: 200_000 },
  fanout: { samples: 2_000, rooms: 20 },
  sweep: {
    expirations: 20_000,
    roomSizes: [5, 128, 1_000],
    idleRooms: [1_000, 100_000],
    passes: 3,
  },
  leave: { connections: 2_000, roomSize: 5, intervalMs: 1_000 },
  // 3 000 : 1 000 ms, the defaults' 45 s : 15 s ratio, so a run sees several windows.
  live: {
    roomSizes: [5, 20],
    connections: 10_000,
    presenceWindowMs: 3_000,
    heartbeatMs: 1_000,
    segmentMs: 5_000,
    repeats: 2,
    alternative: { clients: 50, pipeline: 16, requests: 200_000, repeats: 3 },
  },
  memory: { users: 20_000, roomSizes: [5, 20, 128, 1_000], replayJoins: 10_000 },
  counts: { connections: 200_000, roomSize: 10, runs: 5 },
  roster: { roomSizes: [20, 200, 1_000, 10_000], reads: 50, compareMembers: 200, samples: 2_000 },
  gateway: {
    idle: { sockets: 10_000, opening: 100 },
    sockets: 5_000,
    roomSize: 20,
    opening: 100,
    fanout: { samples: 1_000, rooms: 20, warmup: 20 },
    heartbeat: { sockets: 200, roomsPerSocket: 3, inFlight: 2, runMs: 3_000, repeats: 3 },
    calls: { sockets: 1_600, rooms: 80, presenceWindowMs: 6_000, runMs: 12_000 },
  },
  bigRooms: {
    rows: [
      { roomSize: 10, rooms: 1_000 },
      { roomSize: 1_000, rooms: 10 },
      { roomSize: 10_000, rooms: 1 },
      // The same room spread over two gateways, as a load balancer would.
      { roomSize: 10_000, rooms: 1, gateways: 2 },
    ],
    churn: 0.01,
    runMs: 20_000,
    sampled: 500,
    storm: { socketsPerGateway: 10_000, roomSize: 100, presenceWindowMs: 10_000 },
  },
  log: { logLength: 10_000, rooms: 50, usersPerRoom: 20, inFlight: 16, runMs: 1_200, repeats: 5 },
  grace: {
    leaveGraceMs: 5_000,
    capacity: 50,
    steady: { roomSize: 20, clients: 50, pipeline: 16, requests: 200_000, repeats: 3 },
    paths: { rooms: 500, roomSize: 20, inFlight: 16, phases: 6 },
  },
  scripts: { roomSizes: [5, 20], rooms: 2_000 },
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
  ceiling: { roomSizes: [5, 20, 128], clients: 10, pipeline: 16, requests: 5_000 },
  fanout: { samples: 30, rooms: 5 },
  sweep: {
    expirations: 300,
    roomSizes: [5, 128, 1_000],
    idleRooms: [100, 2_000],
    passes: 1,
  },
  leave: { connections: 100, roomSize: 5, intervalMs: 250 },
  live: {
    roomSizes: [5, 20],
    connections: 500,
    presenceWindowMs: 1_500,
    heartbeatMs: 500,
    segmentMs: 1_000,
    repeats: 1,
    alternative: { clients: 10, pipeline: 16, requests: 5_000, repeats: 1 },
  },
  memory: { users: 1_000, roomSizes: [5, 20, 128, 1_000], replayJoins: 1_000 },
  counts: { connections: 2_000, roomSize: 10, runs: 1 },
  roster: { roomSizes: [20, 200, 1_000, 2_500], reads: 3, compareMembers: 200, samples: 50 },
  gateway: {
    idle: { sockets: 300, opening: 50 },
    sockets: 200,
    roomSize: 20,
    opening: 50,
    fanout: { samples: 30, rooms: 5, warmup: 5 },
    heartbeat: { sockets: 20, roomsPerSocket: 3, inFlight: 2, runMs: 500, repeats: 1 },
    calls: { sockets: 160, rooms: 8, presenceWindowMs: 6_000, runMs: 4_000 },
  },
  bigRooms: {
    rows: [
      { roomSize: 10, rooms: 20 },
      { roomSize: 100, rooms: 2 },
      { roomSize: 300, rooms: 1 },
      { roomSize: 300, rooms: 1, gateways: 2 },
    ],
    churn: 0.01,
    runMs: 3_000,
    sampled: 50,
    storm: { socketsPerGateway: 150, roomSize: 100, presenceWindowMs: 3_000 },
  },
  log: { logLength: 1_000, rooms: 10, usersPerRoom: 20, inFlight: 16, runMs: 300, repeats: 1 },
  grace: {
    leaveGraceMs: 5_000,
    capacity: 50,
    steady: { roomSize: 20, clients: 10, pipeline: 16, requests: 5_000, repeats: 1 },
    paths: { rooms: 50, roomSize: 20, inFlight: 16, phases: 1 },
  },
  scripts: { roomSizes: [5, 20], rooms: 30 },
};
