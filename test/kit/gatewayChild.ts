import { spawn, type ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { SignJWT } from "jose";
import type { Limits } from "../../src/gateway/index.js";
import type { RollcallOptions } from "../../src/index.js";
import type {
  FromGateway,
  GatewayProcessConfig,
  GatewayStats,
  ToGateway,
} from "./gatewayProcess.js";

/**
 * Gateway processes of their own (test/kit/gatewayProcess.ts) for the bench and the storm fault
 * test: started on a Redis, asked for their figures over IPC, stopped or killed.
 */

const SECRET = "the bench's gateway secret, long enough for HS256";
/** Every instance of the deployment: nobody expires, a leave is announced at once. */
export const ENGINE: RollcallOptions = { presenceWindowMs: 600_000, leaveGraceMs: 0, prefix: "gw" };
/**
 * Frames are not what is measured: a socket may send as fast as the gateway answers. The caps are
 * set here rather than left to the defaults (the process's share of its descriptor limit among
 * them): every socket is a user of its own, and the process holds all of them.
 */
const LIMITS: Partial<Limits> = {
  rateBurst: 1_000_000,
  ratePerSecond: 1_000_000,
  maxSockets: 50_000,
  maxSocketsPerUser: 64,
  maxSocketsPerAddress: 0,
};
/** No pings while measuring (the demo pings every 2 s, the default every 15 s). */
const PING_MS = 3_600_000;
const TIMEOUT_MS = 10_000;
const PROCESS = fileURLToPath(new URL("./gatewayProcess.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface GatewaySetup {
  engine?: RollcallOptions;
  limits?: Partial<Limits>;
  gateway?: GatewayProcessConfig["gateway"];
}

export class GatewayChild {
  private readonly waiting = new Map<number, (stats: GatewayStats) => void>();
  private next = 0;

  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    readonly exited: Promise<number | null>,
  ) {
    child.on("message", (message: FromGateway) => {
      if (message.type !== "stats") return;
      this.waiting.get(message.id)?.(message.stats);
      this.waiting.delete(message.id);
    });
  }

  static start(redisUrl: string, plain = false, setup: GatewaySetup = {}): Promise<GatewayChild> {
    const config: GatewayProcessConfig = {
      redisUrl,
      engine: setup.engine ?? ENGINE,
      secret: SECRET,
      limits: { ...LIMITS, ...setup.limits },
      pingMs: PING_MS,
      plain,
      ...(setup.gateway === undefined ? {} : { gateway: setup.gateway }),
    };
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", PROCESS], {
      cwd: ROOT,
      env: { ...process.env, BENCH_GATEWAY: JSON.stringify(config) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error("a gateway process did not start within 20 s"));
      }, 20_000);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`a gateway process exited (${code ?? "signal"}) before listening`));
      });
      child.on("message", (message: FromGateway) => {
        if (message.type !== "listening") return;
        clearTimeout(timer);
        resolve(new GatewayChild(child, `ws://127.0.0.1:${message.port}/presence`, exited));
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Kills the process at once: its sockets drop without a close frame, its rooms not left. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }

  stats(gc = false, resetLoop = false): Promise<GatewayStats> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("a gateway process did not answer")), 30_000);
      this.waiting.set(id, (stats) => {
        clearTimeout(timer);
        resolve(stats);
      });
      this.child.send({ type: "stats", id, gc, resetLoop } satisfies ToGateway);
    });
  }

  /** A gateway that reported an error did not do what the bench measured: the run fails. */
  async checkErrors(): Promise<void> {
    const { errors, firstError } = await this.stats();
    if (errors > 0) throw new Error(`a gateway process reported ${errors} errors: ${firstError}`);
  }

  /** Waits until the gateway has closed every socket it held (and left their rooms). */
  async drained(): Promise<void> {
    const deadline = performance.now() + TIMEOUT_MS;
    while ((await this.stats()).connections > 0) {
      if (performance.now() > deadline) throw new Error("the gateway kept sockets open");
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.child.send({ type: "stop" } satisfies ToGateway);
    const killer = setTimeout(() => this.child.kill("SIGKILL"), 8_000);
    await this.exited;
    clearTimeout(killer);
  }
}

/** A token of the bench's gateways for a user, allowed in every room. */
export function token(user: string): Promise<string> {
  return new SignJWT({ rooms: ["*"] })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(user)
    .setExpirationTime("1h")
    .sign(new TextEncoder().encode(SECRET));
}
