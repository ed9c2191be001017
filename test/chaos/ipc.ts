import type { RollcallOptions } from "../../src/index.js";
import type { CallRecord } from "../kit/invariants.js";

/** What a child process is told to do: argv[2], as JSON. */
export interface ChildConfig {
  url: string;
  engine: RollcallOptions;
  seed: number;
  rooms: string[];
  users: string[];
  /**
   * A writer's users who come and go: each called on now and then, in two rooms of their own
   * (`rooms[i]`, `rooms[i + 1]`), so that they go online and offline (the run's other users are
   * hardly ever out of every room).
   */
  visitors?: string[];
  /** A fleet writer's (fleet.ts) own settings. */
  fleet?: FleetConfig;
}

/** A fleet writer: connections it holds, each a user of its own, heartbeated every beat. */
export interface FleetConfig {
  /** Starts its users' ids: unique among the run's writers. */
  name: string;
  /** One heartbeatMany of all its connections each beat, or one heartbeat call each. */
  batch: boolean;
  /** Connections held at once. */
  holds: number;
  beatMs: number;
  /** The chance, each beat, that one connection is replaced by a new one (a user who joins). */
  churn: number;
  /** Of those replaced, the share that leave (the others go silent and expire). */
  leaving: number;
  /** Bytes of state a member joins with. */
  stateBytes: number;
}

/** A fleet writer's calls since its last report: heartbeats answered, refusals by op and code. */
export interface FleetCounts {
  answered: number;
  refused: Record<string, number>;
}

/** From a child to the runner, over IPC. */
export type ChildMessage =
  | { type: "ready" }
  /** A call that resolved, with its result. */
  | { type: "call"; call: CallRecord }
  /** A call that rejected: no result. */
  | { type: "failed"; code: string }
  /** A sweeper's pass that expired something or changed a user's status (drained changes). */
  | { type: "pass"; leaves: number; typingStops: number; statusChanges: number }
  | { type: "sweep-failed"; code: string }
  | { type: "unhandled"; message: string }
  /** A fleet writer's beat went out (every connection it holds heartbeated); counts so far. */
  | ({ type: "beat" } & FleetCounts)
  /** A call of a fleet writer reported this join. */
  | { type: "joined"; room: string; user: string; epoch: string; seq: number }
  /** A fleet writer held (heartbeated) this user's connection from `from` until `to` (ms). */
  | { type: "held"; room: string; user: string; from: number; to: number }
  /** A fleet writer is done: every connection left, every call settled; its last counts. */
  | ({ type: "done" } & FleetCounts);

/** From the runner to a child: stop (child) or end the run under way (serve). */
export interface StopMessage {
  type: "stop";
}

/** From the runner to a served child: a run to make, until the next stop. */
export interface RunMessage {
  type: "run";
  config: ChildConfig;
}

/** Sends to the parent; a parent that is gone (or a channel closing) is no error of the child's. */
export function tell(message: ChildMessage): void {
  void told(message);
}

/** tell(), resolving once the message is written (or could not be): a child's last word. */
export function told(message: ChildMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected || !process.send) return resolve();
    try {
      process.send(message, undefined, {}, () => resolve());
    } catch {
      resolve(); // the channel closed meanwhile
    }
  });
}

/** The child's own setup: its config, the stop request, unhandled rejections reported. */
export function child(): { config: ChildConfig; stopped: Promise<void> } {
  const config = JSON.parse(process.argv[2] ?? "{}") as ChildConfig;
  process.on("unhandledRejection", (reason) =>
    tell({ type: "unhandled", message: String(reason) }),
  );
  // The runner going away (or killed) must not leave children behind.
  process.on("disconnect", () => process.exit(0));
  const stopped = new Promise<void>((resolve) => {
    process.on("message", (message: StopMessage) => {
      if (message.type === "stop") resolve();
    });
  });
  return { config, stopped };
}

/**
 * The setup of a child that serves run after run (one process for every scenario of a runner):
 * `run` is called for each run message, its stop resolving at the next stop message, one run at a
 * time; it ends with a last word of its own (told). Unhandled rejections are reported.
 */
export function serve(run: (config: ChildConfig, stopped: Promise<void>) => Promise<void>): void {
  process.on("unhandledRejection", (reason) =>
    tell({ type: "unhandled", message: String(reason) }),
  );
  process.on("disconnect", () => process.exit(0));
  let stop = () => undefined as void;
  let runs = Promise.resolve();
  process.on("message", (message: RunMessage | StopMessage) => {
    if (message.type === "stop") return stop();
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    runs = runs
      .then(() => run(message.config, stopped))
      .catch((error: unknown) => tell({ type: "unhandled", message: String(error) }));
  });
  tell({ type: "ready" });
}
