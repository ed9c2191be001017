import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster, Redis, type ClusterOptions } from "ioredis";
import { RedisBinary } from "redis-memory-server";
import { systemRedisServer } from "../../src/embedded.js";
import { portIsFree } from "./ports.js";
import { eventually } from "./wait.js";

/** One node as a node's CLUSTER NODES line describes it. */
export interface NodeInfo {
  id: string;
  host: string;
  port: number;
  role: "master" | "replica";
  /** The id of its master, for a replica. */
  masterId?: string;
  /** The slot ranges it serves, both ends included. */
  slots: [number, number][];
  /** As CLUSTER NODES spells them: myself, master, slave, fail?, fail, handshake, noaddr... */
  flags: string[];
}

export interface LocalClusterOptions {
  /** Replicas per master. */
  replicas?: number;
  appendonly?: boolean;
}

export interface MigrateOptions {
  /** Keys per MIGRATE. */
  batch?: number;
  onBatch?: (moved: string[]) => void | Promise<void>;
}

export interface LocalCluster {
  /** Every node, masters first, then replicas, in startup order (roles change with failovers). */
  readonly nodes: { host: string; port: number }[];
  /** The persistent admin connection of a node (replaced by restart()). */
  admin(port: number): Redis;
  /** Every node as the first running node sees them, failed ones included. */
  topology(): Promise<NodeInfo[]>;
  /**
   * The masters not flagged as failed, as the first running node sees them: a master killed in
   * the last few seconds is still listed, until the others agree that it failed.
   */
  masters(): Promise<NodeInfo[]>;
  /** The replicas not flagged as failed, as the first running node sees them. */
  replicas(): Promise<NodeInfo[]>;
  nodeForSlot(slot: number): Promise<NodeInfo>;
  /** CLUSTER FAILOVER [mode] on a replica, then waits until it is master and the cluster ok. */
  failover(replicaPort: number, mode?: "FORCE" | "TAKEOVER"): Promise<void>;
  /** Kills a node's process and waits for it to exit. */
  kill(port: number, signal?: "SIGKILL" | "SIGTERM"): Promise<void>;
  /** Starts a killed node again with the same port, dir and nodes.conf; resolves once it answers. */
  restart(port: number): Promise<void>;
  /**
   * Until every running node says cluster_state:ok and they all agree on who owns which slots and
   * who replicates whom.
   * Right after a kill this passes at once: the others notice only after the node timeout.
   */
  waitForOk(timeoutMs?: number): Promise<void>;
  /** Until every running replica has its link to its master up. */
  waitForReplicas(timeoutMs?: number): Promise<void>;
  /** Moves one slot and its keys, the way redis-cli --cluster reshard does, then waits for ok. */
  migrateSlot(
    slot: number,
    fromPort: number,
    toPort: number,
    options?: MigrateOptions,
  ): Promise<void>;
  stop(): Promise<void>;
}

interface Node {
  readonly port: number;
  readonly args: string[];
  /** Unset once the process exited. */
  process?: ChildProcess;
  exited: Promise<void>;
  admin: Redis;
}

const SLOTS = 16_384;
const HOST = "127.0.0.1";

/** The hash slot of a key, as Redis computes it: CRC16 (XMODEM) of the key or its {hash tag}. */
export function keySlot(key: string | Buffer): number {
  const bytes = typeof key === "string" ? Buffer.from(key) : key;
  const open = bytes.indexOf("{");
  const close = open === -1 ? -1 : bytes.indexOf("}", open + 1);
  return crc16(close > open + 1 ? bytes.subarray(open + 1, close) : bytes) % SLOTS;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = ((crc << 1) ^ (crc & 0x8000 ? 0x1021 : 0)) & 0xffff;
  }
  return crc;
}

/** A free port whose cluster bus port (port + 10 000) is free too. */
async function freeNodePort(taken: number[]): Promise<number> {
  for (;;) {
    // Below the ephemeral range (32768 up): no outgoing connection takes it before the node binds.
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (taken.includes(port)) continue;
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) return port;
  }
}

/** Its own dir per node: replicas write RDB files during a sync, and AOFs must not mix. */
function nodeArgs(dir: string, port: number, appendonly: boolean): string[] {
  const own = join(dir, String(port));
  mkdirSync(own);
  // A short node timeout: a dead master is failed over in seconds rather than 15+.
  return [
    ...["--port", String(port), "--bind", HOST, "--dir", own],
    ...["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
    ...["--cluster-node-timeout", "2000"],
    ...["--save", "", "--appendonly", appendonly ? "yes" : "no"],
    // A master otherwise waits 5 s for more replicas before a full sync: slow starts and rejoins.
    ...["--repl-diskless-sync-delay", "0"],
  ];
}

function launch(binary: string, node: Node) {
  const child = spawn(binary, node.args, {
    stdio: process.env.CLUSTER_DEBUG ? "inherit" : "ignore",
  });
  node.process = child;
  node.exited = new Promise<unknown>((resolve) => {
    child.once("exit", resolve);
    child.once("error", resolve); // a failed spawn may never emit exit
  }).then(() => {
    if (node.process === child) node.process = undefined;
  });
}

function adminOf(port: number): Redis {
  return new Redis({
    host: HOST,
    port,
    retryStrategy: (times) => (times > 100 ? null : 50),
    showFriendlyErrorStack: true,
  }).on("error", () => undefined); // refused until the server listens; ping() fails if it never does
}

function parseNodes(text: string): NodeInfo[] {
  return text
    .trim()
    .split("\n")
    .map((line) => {
      const [id = "", address = "", flags = "", master = "-", , , , , ...slots] = line.split(" ");
      const [, host = "", port = "0"] = /^(.*):(\d+)@/.exec(address) ?? [];
      const flagList = flags.split(",");
      return {
        id,
        host,
        port: Number(port),
        role: flagList.includes("slave") ? "replica" : "master",
        ...(master === "-" ? {} : { masterId: master }),
        // [slot->-id] and [slot-<-id] mark migrations in progress, not ownership
        slots: slots.filter((s) => !s.startsWith("[")).map(slotRange),
        flags: flagList,
      } satisfies NodeInfo;
    });
}

function slotRange(text: string): [number, number] {
  const [from, to = from] = text.split("-").map(Number);
  return [from!, to!];
}

async function clusterNodes(node: Node): Promise<NodeInfo[]> {
  return parseNodes(String(await node.admin.call("CLUSTER", "NODES")));
}

/**
 * Who owns which slots and who replicates whom, in one comparable string: a node that still
 * takes a replica for a master refuses it a failover vote, and masters() would list it.
 */
function layout(nodes: NodeInfo[]): string {
  return nodes
    .filter((n) => !n.flags.includes("handshake"))
    .map((n) => `${n.id}:${n.masterId ?? n.slots.map((r) => r.join("-")).join(",")}`)
    .sort()
    .join(" ");
}

/**
 * A throwaway Redis Cluster of `size` masters (and `replicas` replicas for each) on loopback,
 * built with CLUSTER ADDSLOTSRANGE, MEET and REPLICATE (no redis-cli needed), from the same
 * redis-server binary the other tests use. Every node is its own process, to kill and restart.
 */
export async function startCluster(
  size = 3,
  { replicas = 0, appendonly = false }: LocalClusterOptions = {},
): Promise<LocalCluster> {
  const binary = systemRedisServer() ?? (await RedisBinary.getPath());
  const dir = mkdtempSync(join(tmpdir(), "rollcall-cluster-"));
  const ports: number[] = [];
  for (let i = 0; i < size * (1 + replicas); i++) ports.push(await freeNodePort(ports));
  const nodes: Node[] = ports.map((port) => {
    const node: Node = {
      port,
      args: nodeArgs(dir, port, appendonly),
      exited: Promise.resolve(),
      admin: adminOf(port),
    };
    launch(binary, node);
    return node;
  });
  const cluster = localCluster(binary, dir, nodes);
  try {
    await Promise.all(nodes.map((n) => n.admin.ping())); // queued until the server listens
    const masters = nodes.slice(0, size);
    const per = Math.ceil(SLOTS / size);
    await Promise.all(
      masters.map(async (n, i) => {
        await n.admin.call("CLUSTER", "ADDSLOTSRANGE", i * per, Math.min(SLOTS, (i + 1) * per) - 1);
        // Distinct epochs, as redis-cli sets them: no collision to settle before the first election
        await n.admin.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1);
      }),
    );
    for (const port of ports.slice(1)) await nodes[0]!.admin.call("CLUSTER", "MEET", HOST, port);
    for (const [i, replica] of nodes.slice(size).entries()) {
      await replicate(replica, masters[i % size]!);
    }
    await cluster.waitForOk();
    await cluster.waitForReplicas();
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/** CLUSTER REPLICATE, once MEET's gossip has told the replica about its master. */
async function replicate(replica: Node, master: Node) {
  const masterId = String(await master.admin.call("CLUSTER", "MYID"));
  await eventually(
    async () => (await clusterNodes(replica)).some((n) => n.id === masterId && n.port > 0),
    20_000,
    `node ${replica.port} to learn about ${master.port}`,
  );
  await replica.admin.call("CLUSTER", "REPLICATE", masterId);
}

function localCluster(binary: string, dir: string, nodes: Node[]): LocalCluster {
  const at = (port: number) => {
    const node = nodes.find((n) => n.port === port);
    if (!node) throw new Error(`no node on port ${port}`);
    return node;
  };
  const running = () => nodes.filter((n) => n.process);
  const topology = async () => {
    const [viewer] = running();
    if (!viewer) throw new Error("no node is running");
    return clusterNodes(viewer);
  };
  const serving = async (role: NodeInfo["role"]) =>
    (await topology()).filter((n) => n.role === role && !n.flags.includes("fail"));
  const masters = () => serving("master");
  const roleOf = async (node: Node) => String(((await node.admin.call("ROLE")) as unknown[])[0]);
  const myId = async (node: Node) => String(await node.admin.call("CLUSTER", "MYID"));

  const waitForOk = (timeoutMs = 20_000) =>
    eventually(
      async () => {
        const views = await Promise.all(
          running().map(async (n) => ({
            info: String(await n.admin.call("CLUSTER", "INFO")),
            layout: layout(await clusterNodes(n)),
          })),
        );
        return (
          views.every((v) => v.info.includes("cluster_state:ok")) &&
          new Set(views.map((v) => v.layout)).size === 1
        );
      },
      timeoutMs,
      "cluster_state:ok and one layout on every node",
    );

  return {
    nodes: nodes.map(({ port }) => ({ host: HOST, port })),
    admin: (port) => at(port).admin,
    topology,
    masters,
    replicas: () => serving("replica"),
    nodeForSlot: async (slot) => {
      const owner = (await masters()).find((m) => m.slots.some(([a, b]) => a <= slot && slot <= b));
      if (!owner) throw new Error(`no master serves slot ${slot}`);
      return owner;
    },
    failover: async (replicaPort, mode) => {
      const node = at(replicaPort);
      // Redis gives a manual failover up after 5 s when the replica cannot catch up with its
      // master in time (a loaded host): ask again, as an operator would. And a replica that won
      // an election a few seconds before may count those votes again, keep its old config epoch
      // and be demoted at once (Redis 7.0, after forced failovers back and forth): TAKEOVER
      // then, which takes a new epoch (the replica is in sync, nothing is lost).
      for (let attempt = 1, how = mode; ; attempt++) {
        await node.admin.call("CLUSTER", "FAILOVER", ...(how ? [how] : []));
        try {
          await eventually(
            async () => (await roleOf(node)) === "master",
            6_000,
            `node ${replicaPort} to take over`,
          );
          await waitForOk();
          if ((await roleOf(node)) === "master") return;
          how = "TAKEOVER";
        } catch (error) {
          if (attempt === 3) throw error;
        }
        if (attempt === 3) throw new Error(`node ${replicaPort} was demoted again`);
      }
    },
    kill: async (port, signal = "SIGKILL") => {
      const node = at(port);
      node.admin.disconnect();
      node.process?.kill(signal);
      await node.exited;
    },
    restart: async (port) => {
      const node = at(port);
      if (node.process) throw new Error(`node ${port} is still running`);
      launch(binary, node);
      node.admin = adminOf(port);
      await node.admin.ping();
    },
    waitForOk,
    waitForReplicas: (timeoutMs = 20_000) =>
      eventually(
        async () => {
          const infos = await Promise.all(running().map((n) => n.admin.info("replication")));
          return infos.every(
            (i) => !i.includes("role:slave") || i.includes("master_link_status:up"),
          );
        },
        timeoutMs,
        "every replica's link up",
      ),
    migrateSlot: async (slot, fromPort, toPort, { batch = 10, onBatch } = {}) => {
      const [from, to] = [at(fromPort), at(toPort)];
      const [fromId, toId] = await Promise.all([myId(from), myId(to)]);
      await to.admin.call("CLUSTER", "SETSLOT", slot, "IMPORTING", fromId);
      await from.admin.call("CLUSTER", "SETSLOT", slot, "MIGRATING", toId);
      for (;;) {
        const keys = (await from.admin.call("CLUSTER", "GETKEYSINSLOT", slot, batch)) as string[];
        if (keys.length === 0) break;
        await from.admin.call("MIGRATE", HOST, toPort, "", 0, 5000, "KEYS", ...keys);
        await onBatch?.(keys); // e.g. traffic against the half-migrated slot
      }
      const others = running().filter((n) => n !== from && n !== to);
      const roles = await Promise.all(others.map(roleOf));
      // The target first: once the source answers MOVED for the slot, the target must accept it.
      for (const node of [to, from, ...others.filter((_, i) => roles[i] === "master")]) {
        await node.admin.call("CLUSTER", "SETSLOT", slot, "NODE", toId);
      }
      await waitForOk();
    },
    stop: async () => {
      nodes.forEach((n) => n.admin.disconnect());
      nodes.forEach((n) => n.process?.kill("SIGKILL"));
      await Promise.all(nodes.map((n) => n.exited));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Mocha hooks for a describe block: a local cluster for its tests, and the connections they make,
 * closed after them.
 */
export function useCluster(size = 3, options: LocalClusterOptions = {}) {
  let cluster: LocalCluster | undefined;
  const connections: (Cluster | Redis)[] = [];
  const track = <T extends Cluster | Redis>(c: T): T => (connections.push(c), c);
  before(async function () {
    this.timeout(60_000);
    cluster = await startCluster(size, options);
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
    /** The cluster itself, for fault operations. */
    cluster: () => cluster!,
  };
}
