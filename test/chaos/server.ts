import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { RedisBinary } from "redis-memory-server";
import { systemRedisServer } from "../../src/embedded.js";
import { freePort } from "../kit/ports.js";
import { eventually } from "../kit/wait.js";

/**
 * A redis-server process of the runner's own, to stop, kill and start again on the same port and
 * dir. Durable: every write is in the AOF, fsynced, before its reply goes out, so a SIGKILL loses
 * nothing acknowledged. Otherwise: no persistence at all, and a restart starts empty.
 */
export class RedisProcess {
  readonly host = "127.0.0.1";
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly dir = mkdtempSync(join(tmpdir(), "rollcall-chaos-"));
  /** Stopped with SIGSTOP and not yet continued. */
  stopped = false;

  private constructor(
    private readonly binary: string,
    readonly port: number,
    readonly durable: boolean,
  ) {}

  static async start(durable: boolean): Promise<RedisProcess> {
    const binary = systemRedisServer() ?? (await RedisBinary.getPath());
    const server = new RedisProcess(binary, await freePort(), durable);
    await server.launch();
    return server;
  }

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the process and resolves once it answers (after loading its AOF). */
  async launch(): Promise<void> {
    const persistence = this.durable
      ? ["--appendonly", "yes", "--appendfsync", "always"]
      : ["--appendonly", "no"];
    const child = spawn(
      this.binary,
      [
        ...["--port", String(this.port), "--bind", this.host, "--dir", this.dir],
        ...["--save", "", ...persistence],
      ],
      { stdio: "ignore" },
    );
    this.child = child;
    this.stopped = false;
    this.exited = new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    }).then(() => {
      if (this.child === child) this.child = undefined;
    });
    const probe = new Redis({ host: this.host, port: this.port, retryStrategy: () => 20 });
    probe.on("error", () => undefined);
    try {
      const answers = async () => (await probe.ping()) === "PONG";
      await eventually(answers, 20_000, `redis-server on ${this.port} to start`);
    } finally {
      probe.disconnect();
    }
  }

  signal(signal: "SIGSTOP" | "SIGCONT"): void {
    this.child?.kill(signal);
    this.stopped = signal === "SIGSTOP";
  }

  /** SIGKILL, then the same server again: with its AOF when durable, empty otherwise. */
  async restart(): Promise<void> {
    await this.kill();
    await this.launch();
  }

  async kill(): Promise<void> {
    if (this.stopped) this.signal("SIGCONT");
    this.child?.kill("SIGKILL");
    await this.exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
