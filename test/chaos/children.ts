import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ChildConfig, ChildMessage, RunMessage } from "./ipc.js";

const HERE = fileURLToPath(new URL(".", import.meta.url));

/**
 * A child process of a chaos runner (its module in this folder), and what it reported: one that
 * runs its config until stopped (writer, sweeper: ipc.child), or one that serves run after run
 * (fleet: ipc.serve), given each with run() and ended with finish().
 */
export class Child {
  process: ChildProcess;
  readonly ready: Promise<void>;
  private exited: Promise<void>;
  private finished: (() => void) | undefined;
  /** A serving child's run is under way (run() sent, no "done" yet). */
  private running = false;

  constructor(
    readonly role: "writer" | "sweeper" | "fleet",
    config: ChildConfig | null,
    private onMessage: (message: ChildMessage) => void,
  ) {
    this.process = fork(`${HERE}${role}.ts`, config ? [JSON.stringify(config)] : [], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.exited = new Promise((resolve) => this.process.once("exit", () => resolve()));
    this.ready = new Promise((resolve) => {
      this.process.on("message", (message: ChildMessage) => {
        if (message.type === "ready") return resolve();
        this.onMessage(message);
        if (message.type !== "done") return;
        this.running = false;
        this.finished?.();
      });
      this.process.once("exit", () => resolve());
    });
  }

  get alive(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  async kill(): Promise<void> {
    this.process.kill("SIGKILL");
    await this.exited;
  }

  /** Asks it to stop after its call or pass in flight; killed if it takes too long. */
  async stop(): Promise<void> {
    if (!this.alive) return;
    if (this.process.connected) this.process.send({ type: "stop" });
    const timer = setTimeout(() => this.process.kill("SIGKILL"), 10_000);
    await this.exited;
    clearTimeout(timer);
  }

  /** A serving child's end: its IPC channel closes, and it exits. */
  async close(): Promise<void> {
    if (this.alive && this.process.connected) this.process.disconnect();
    await this.exited;
  }

  /** A serving child: starts a run of `config`, its messages to `onMessage`. */
  run(config: ChildConfig, onMessage: (message: ChildMessage) => void): void {
    this.onMessage = onMessage;
    this.running = true;
    this.process.send({ type: "run", config } satisfies RunMessage);
  }

  /** Ends the run under way, if any: resolves once the child is done with it (killed after 20 s). */
  async finish(): Promise<void> {
    if (!this.alive || !this.running) return;
    const done = new Promise<void>((resolve) => (this.finished = resolve));
    this.process.send({ type: "stop" });
    const timer = setTimeout(() => this.process.kill("SIGKILL"), 20_000);
    await Promise.race([done, this.exited]);
    clearTimeout(timer);
  }
}
