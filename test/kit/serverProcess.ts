import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A server of the kit in a process of its own, to SIGKILL. */
export interface ServerProcess {
  readonly port: number;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** SIGKILL: the server has no chance to leave anything. */
  kill(): Promise<void>;
  /** SIGTERM: the server closes as it would. */
  stop(): Promise<void>;
}

/**
 * Starts a server module (a file URL, or a path as the bench gives it) with `env` (its settings),
 * through tsx loaded by Node itself (a signal hits the server, not a wrapper); resolves once it
 * says its port over IPC.
 */
export async function spawnServer(
  module: string,
  env: Record<string, string>,
): Promise<ServerProcess> {
  const file = module.startsWith("file:") ? fileURLToPath(module) : module;
  const child = spawn(process.execPath, ["--import", "tsx", file], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    void exited.then(() => reject(new Error(`${module} exited before listening`)));
    child.on("message", (message: { port?: number }) => {
      if (typeof message.port === "number") resolve(message.port);
    });
  });
  const signal = async (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
    await exited;
  };
  return { port, child, exited, kill: () => signal("SIGKILL"), stop: () => signal("SIGTERM") };
}
