import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * A kit module run as a process of its own (through tsx), spoken to over IPC: each request
 * carries an id, and the child answers it with that id (`answer`, on the child's side). The
 * bench and the storm hold thousands of client sockets in such processes: a process's
 * open-files limit, and its one core, would not hold them all.
 */

interface Request {
  id: number;
  request: unknown;
}
type Answer = { id: number; reply: unknown } | { id: number; error: string };

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export class KitChild {
  private readonly waiting = new Map<number, (answer: Answer) => void>();
  private next = 0;
  readonly exited: Promise<number | null>;

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once("exit", resolve));
    // A request sent to a child that has gone fails; the error must not crash the parent.
    child.on("error", () => undefined);
    child.on("message", (answer: Answer) => {
      this.waiting.get(answer.id)?.(answer);
      this.waiting.delete(answer.id);
    });
    void this.exited.then((code) => {
      for (const settle of this.waiting.values()) {
        settle({ id: -1, error: `the process exited (${code ?? "signal"})` });
      }
      this.waiting.clear();
    });
  }

  /** Starts `module` (a path under the repository) with its settings as JSON in KIT_CHILD, and
   * any flags for node. */
  static start(module: string, settings: unknown, flags: readonly string[] = []): KitChild {
    const child = spawn(process.execPath, [...flags, "--import", "tsx", module], {
      cwd: ROOT,
      env: { ...process.env, KIT_CHILD: JSON.stringify(settings) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    return new KitChild(child);
  }

  /** Sends a request; resolves with the child's reply, rejects with its error or its exit. */
  request<T>(request: unknown, timeoutMs = 120_000): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      if (!this.child.connected) {
        reject(new Error("the kit process has exited"));
        return;
      }
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`a kit process did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, (answer) => {
        clearTimeout(timer);
        if ("error" in answer) reject(new Error(answer.error));
        else resolve(answer.reply as T);
      });
      this.child.send({ id, request } satisfies Request);
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Kills the process at once (SIGKILL): what it held drops, nothing is closed. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

/** The child's side: its settings, and every request answered by `handle` as it comes. */
export function answer<S>(handle: (request: never) => unknown): S {
  process.on("message", (message: Request) => {
    void (async () => {
      try {
        const reply = await handle(message.request as never);
        process.send?.({ id: message.id, reply: reply ?? null } satisfies Answer);
      } catch (error) {
        const text = error instanceof Error ? error.message : String(error);
        process.send?.({ id: message.id, error: text } satisfies Answer);
      }
    })();
  });
  // The parent went away: nothing is left to answer.
  process.on("disconnect", () => process.exit(0));
  return JSON.parse(process.env.KIT_CHILD ?? "null") as S;
}
