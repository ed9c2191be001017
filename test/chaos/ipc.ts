import type { RollcallOptions } from "../../src/index.js";
import type { CallRecord } from "../kit/invariants.js";

/** What a child process is told to do: argv[2], as JSON. */
export interface ChildConfig {
  url: string;
  engine: RollcallOptions;
  seed: number;
  rooms: string[];
  users: string[];
}

/** From a child to the runner, over IPC. */
export type ChildMessage =
  | { type: "ready" }
  /** A call that resolved, with its result. */
  | { type: "call"; call: CallRecord }
  /** A call that rejected: no result. */
  | { type: "failed"; code: string }
  | { type: "pass"; leaves: number; typingStops: number }
  | { type: "sweep-failed"; code: string }
  | { type: "unhandled"; message: string };

/** From the runner to a child. */
export interface StopMessage {
  type: "stop";
}

/** Sends to the parent; a parent that is gone (or a channel closing) is no error of the child's. */
export function tell(message: ChildMessage): void {
  if (!process.connected || !process.send) return;
  try {
    process.send(message);
  } catch {
    // the channel closed meanwhile
  }
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
