// The demo's gateway instances as child processes: their settings, and how to start, kill and
// restart one. Shared by the demo (src/dev/demo.ts) and the browser tests.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { RollcallOptions } from "../engine/settings.js";

/** Short windows, so that the demo is lively: a tab that dies is gone within seconds. */
export interface Windows {
  presenceWindowMs: number;
  typingWindowMs: number;
  /** How often the gateway heartbeats each joined room. */
  heartbeatMs: number;
  /** Pause between the Sweeper's passes. */
  sweepMs: number;
  /** How often the gateway pings each socket (a silent one is dropped after two). */
  pingMs: number;
  /** How long a user whose last tab closed stays before the leave: a reload shows nothing. */
  leaveGraceMs: number;
}

export const DEMO_WINDOWS: Windows = {
  presenceWindowMs: 6_000,
  typingWindowMs: 3_000,
  heartbeatMs: 2_000,
  sweepMs: 1_000,
  pingMs: 2_000,
  leaveGraceMs: 2_000,
};

const ENV: Record<keyof Windows, string> = {
  presenceWindowMs: "DEMO_PRESENCE_MS",
  typingWindowMs: "DEMO_TYPING_MS",
  heartbeatMs: "DEMO_HEARTBEAT_MS",
  sweepMs: "DEMO_SWEEP_MS",
  pingMs: "DEMO_PING_MS",
  leaveGraceMs: "DEMO_GRACE_MS",
};

/** The demo windows, each overridable by its environment variable (DEMO_PRESENCE_MS, …). */
export function windowsFrom(env: NodeJS.ProcessEnv = process.env): Windows {
  const windows = { ...DEMO_WINDOWS };
  for (const key of Object.keys(ENV) as (keyof Windows)[]) {
    const value = env[ENV[key]];
    if (value !== undefined && value !== "") windows[key] = Number(value);
  }
  return windows;
}

export function windowsEnv(windows: Windows): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of Object.keys(ENV) as (keyof Windows)[]) env[ENV[key]] = String(windows[key]);
  return env;
}

/** The demo's own deployment, so that its short windows never meet another's on a shared Redis. */
export const DEMO_PREFIX = "rollcall-demo";

/** What every instance on the same Redis must agree on (the deployment's settings). */
export function engineOptions(windows: Windows): RollcallOptions {
  return {
    prefix: DEMO_PREFIX,
    presenceWindowMs: windows.presenceWindowMs,
    typingWindowMs: windows.typingWindowMs,
    keyTtlMs: Math.max(60_000, 3 * windows.presenceWindowMs),
    leaveGraceMs: windows.leaveGraceMs,
    userStatus: true,
  };
}

export interface GatewayProcess {
  readonly port: number;
  /** The page's address: http://127.0.0.1:port/ */
  readonly url: string;
  readonly child: ChildProcess;
  /** Settles with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
  /** Stops it cleanly (SIGTERM: every socket leaves its rooms), or kills it after a while. */
  stop(): Promise<void>;
}

const SERVER = fileURLToPath(new URL("./gatewayServer.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Starts src/dev/gatewayServer.ts as a process of its own, on a port (0: any free one; with
 * `fallback`, any free one if the port is taken). Node loads tsx itself rather than through the
 * tsx command, which would put a second process in between: a SIGKILL must hit the gateway.
 */
export function spawnGateway(options: {
  redisUrl: string;
  port: number;
  windows?: Windows;
  fallback?: boolean;
}): Promise<GatewayProcess> {
  const args = ["--import", "tsx", SERVER, String(options.port)];
  if (options.fallback) args.push("--fallback");
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      REDIS_URL: options.redisUrl,
      ...windowsEnv(options.windows ?? DEMO_WINDOWS),
    },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error("the gateway process did not start within 20 s"));
    }, 20_000);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the gateway process exited (${code ?? "signal"}) before listening`));
    });
    child.on("message", (message: { type?: string; port?: number }) => {
      if (message.type !== "listening" || typeof message.port !== "number") return;
      clearTimeout(timer);
      const port = message.port;
      resolve({
        port,
        url: `http://127.0.0.1:${port}/`,
        child,
        exited,
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
          await exited;
          clearTimeout(killer);
        },
      });
    });
  });
}
