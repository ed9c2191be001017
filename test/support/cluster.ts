import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster, Redis, type ClusterOptions } from "ioredis";
import { RedisBinary } from "redis-memory-server";
import { systemRedisServer } from "../src/embedded.js";
import { sleep } from "./support.js";

export interface LocalCluster {
  readonly nodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

const SLOTS = 16_384;

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (port + 10 000) is free too. */
async function freeNodePort(taken: number[]): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (taken.includes(port)) continue;
    if ((await canListen(port)) && (await canListen(port + 10_000))) return port;
  }
}

/**
 * A throwaway Redis Cluster of `size` masters on loopback, built with CLUSTER ADDSLOTSRANGE and
 * CLUSTER MEET (no redis-cli needed), from the same redis-server binary the other tests use.
 */
export async function startCluster(size = 3) {
  const binary = systemRedisServer() ?? (await RedisBinary.getPath());
  const dir = mkdtempSync(join(tmpdir(), "rollcall-cluster-"));
  const ports: number[] = [];
  for (let i = 0; i < size; i++) ports.push(await freeNodePort(ports));
  const servers: ChildProcess[] = ports.map((port) =>
    spawn(
      binary,
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        `nodes-${port}.conf`,
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "no",
      ],
      { stdio: process.env.CLUSTER_DEBUG ? "inherit" : "ignore" },
    ),
  );
  const admins = ports.map(
    (port) =>
      new Redis({
        host: "127.0.0.1",
        port,
        retryStrategy: (times) => (times > 100 ? null : 50),
      }).on("error", () => undefined), // refused until the server listens; ping() fails if it never does
  );
  const stop = async () => {
    admins.forEach((a) => a.disconnect());
    await Promise.all(
      servers.map((s) => new Promise((resolve) => (s.once("exit", resolve), s.kill()))),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(admins.map((a) => a.ping())); // queued until the server listens
    const per = Math.ceil(SLOTS / size);
    await Promise.all(
      admins.map((a, i) =>
        a.call("CLUSTER", "ADDSLOTSRANGE", i * per, Math.min(SLOTS, (i + 1) * per) - 1),
      ),
    );
    for (const port of ports.slice(1)) await admins[0]!.call("CLUSTER", "MEET", "127.0.0.1", port);
    const until = Date.now() + 20_000;
    for (const admin of admins) {
      while (!String(await admin.call("CLUSTER", "INFO")).includes("cluster_state:ok")) {
        if (Date.now() > until) throw new Error("the local cluster did not come up");
        await sleep(100);
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes: ports.map((port) => ({ host: "127.0.0.1", port })), stop } satisfies LocalCluster;
}

/**
 * Mocha hooks for a describe block: a local cluster for its tests, and the connections they make,
 * closed after them.
 */
export function useCluster(size = 3) {
  let cluster: LocalCluster | undefined;
  const connections: (Cluster | Redis)[] = [];
  const track = <T extends Cluster | Redis>(c: T): T => (connections.push(c), c);
  before(async function () {
    this.timeout(60_000);
    cluster = await startCluster(size);
  });
  after(async () => {
    connections.forEach((c) => c.disconnect());
    await cluster?.stop();
  });
  return {
    /** A Cluster client of the local cluster. */
    connect: (options: ClusterOptions = {}) => track(new Cluster(cluster!.nodes, options)),
    /** A plain connection to each node, for admin commands. */
    admins: () => cluster!.nodes.map((node) => track(new Redis(node))),
  };
}
