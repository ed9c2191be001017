import type { Script } from "../script.js";

interface ReconcileStep {
  /** The reconcile's generation (0: start one). */
  generation: number;
  /** Rooms to count, found by their keys (at most a batch). */
  rooms: readonly string[];
  /** Every room was named: the counts become the bucket's. */
  finish: boolean;
}

export const reconcile: Script<ReconcileStep, { generation: number; superseded: boolean }> = {
  name: "reconcile",
  args: ({ generation, rooms, finish }) => [generation, finish ? 1 : 0, ...rooms],
  decode: (reply) => ({ generation: reply.int(0), superseded: reply.int(1) === 1 }),
};
