import type { Script } from "../script.js";

interface ReconcileStep {
  /** The reconcile's generation (0: start one). */
  generation: number;
  cursor: string;
  /** Rooms counted per call. */
  count: number;
}

export const reconcile: Script<ReconcileStep, ReconcileStep & { superseded: boolean }> = {
  name: "reconcile",
  args: ({ generation, cursor, count }) => [generation, cursor, count],
  decode: (reply, { count }) => ({
    generation: reply.int(0),
    cursor: reply.str(1),
    count,
    superseded: reply.int(2) === 1,
  }),
};
