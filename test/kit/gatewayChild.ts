import { setTimeout as sleep } from "node:timers/promises";
import { SignJWT } from "jose";
import type { Limits } from "../../src/gateway/index.js";
import type { RollcallOptions } from "../../src/index.js";
import { KitChild } from "./child.js";
import type { GatewayProcessConfig, GatewayStats, ToGateway } from "./gatewayProcess.js";

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
const PROCESS = "test/kit/gatewayProcess.ts";

export interface GatewaySetup {
  engine?: RollcallOptions;
  limits?: Partial<Limits>;
  gateway?: GatewayProcessConfig["gateway"];
  /** Any socket may follow any user's status. */
  followAnyone?: boolean;
  /** The plain server answers frames (test/kit/gatewayProcess.ts). */
  answers?: boolean;
  /** Runs the process with --cpu-prof, its profile written here when it exits. */
  cpuProfileDir?: string;
}

export class GatewayChild {
  private constructor(
    private readonly kit: KitChild,
    readonly url: string,
  ) {}

  static async start(
    redisUrl: string,
    plain = false,
    setup: GatewaySetup = {},
  ): Promise<GatewayChild> {
    const config: GatewayProcessConfig = {
      redisUrl,
      engine: setup.engine ?? ENGINE,
      secret: SECRET,
      limits: { ...LIMITS, ...setup.limits },
      pingMs: PING_MS,
      plain,
      answers: setup.answers ?? false,
      ...(setup.gateway === undefined ? {} : { gateway: setup.gateway }),
      ...(setup.followAnyone ? { followAnyone: true } : {}),
    };
    const flags = ["--expose-gc"];
    if (setup.cpuProfileDir) flags.push("--cpu-prof", "--cpu-prof-dir", setup.cpuProfileDir);
    const kit = KitChild.start(PROCESS, config, flags);
    try {
      const { port } = await kit.request<{ port: number }>({ type: "address" }, 20_000);
      return new GatewayChild(kit, `ws://127.0.0.1:${port}/presence`);
    } catch (error) {
      await kit.kill();
      throw new Error(`a gateway process did not start: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  get pid(): number {
    return this.kit.pid;
  }

  /** Kills the process at once: its sockets drop without a close frame, its rooms not left. */
  kill(): Promise<void> {
    return this.kit.kill();
  }

  stats(gc = false, resetLoop = false): Promise<GatewayStats> {
    return this.kit.request<GatewayStats>(
      { type: "stats", gc, resetLoop } satisfies ToGateway,
      30_000,
    );
  }

  /** Writes a heap snapshot of the process to `path`. */
  async heapSnapshot(path: string): Promise<void> {
    await this.kit.request({ type: "heap", path } satisfies ToGateway, 120_000);
  }

  /** Starts the CPU profiler, or (given a path) stops it and writes its profile there. */
  async profile(path?: string): Promise<void> {
    await this.kit.request({ type: "profile", path } satisfies ToGateway);
  }

  /** A gateway that reported an error did not do what the bench measured: the run fails. */
  async checkErrors(): Promise<void> {
    const { errors, unhandled, firstError } = await this.stats();
    if (errors + unhandled > 0) {
      throw new Error(
        `a gateway process reported ${errors} errors, ${unhandled} unhandled rejections: ${firstError}`,
      );
    }
  }

  /** Waits until the gateway has closed every socket it held (and left their rooms). */
  async drained(): Promise<void> {
    const deadline = performance.now() + TIMEOUT_MS;
    while ((await this.stats()).connections > 0) {
      if (performance.now() > deadline) throw new Error("the gateway kept sockets open");
      await sleep(20);
    }
  }

  /** Closes the gateway (its sockets, its rooms left) and waits for the process to end; kills it
   * if it has not within 8 s. */
  async stop(): Promise<void> {
    // The process exits as it closes: the request is not answered.
    void this.kit.request({ type: "stop" } satisfies ToGateway).catch(() => undefined);
    const killer = setTimeout(() => void this.kit.kill(), 8_000);
    await this.kit.exited;
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
