import { expect } from "chai";
import { Redis } from "ioredis";
import { keySlot, useCluster, type NodeInfo } from "../kit/cluster.js";
import { isEvalOf, startProxy, type Proxy } from "../kit/proxy.js";
import { client, redisUrl } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

describe("fault-test infrastructure", () => {
  describe("the proxy", () => {
    let proxy: Proxy;
    const through: Redis[] = [];
    const connect = () => {
      const redis = new Redis(proxy.url);
      through.push(redis);
      return redis;
    };

    beforeEach(async () => {
      const { hostname, port } = new URL(redisUrl());
      proxy = await startProxy({ host: hostname, port: Number(port) });
    });
    afterEach(async () => {
      through.splice(0).forEach((r) => r.disconnect());
      await proxy.close();
    });

    it("forwards commands and replies", async () => {
      const redis = connect();
      await redis.set("k", "v");
      expect(await client().get("k")).to.equal("v");
      expect(await redis.get("k")).to.equal("v");
      expect(proxy.connections()).to.equal(1);
    });

    it("drops a reply after the command ran: ioredis resends it on a new connection", async () => {
      const redis = connect();
      let closes = 0;
      redis.on("close", () => (closes += 1));
      await redis.ping(); // ready: the EVAL goes out alone, not with the handshake
      const fired = proxy.dropNextReply(isEvalOf("INCR"));
      const reply = await redis.eval("return redis.call('INCR', KEYS[1])", 1, "k");
      await fired;
      expect(reply, "the resent EVAL's reply").to.equal(2);
      expect(await client().get("k"), "ran twice").to.equal("2");
      expect(closes).to.equal(1);
      expect(
        await redis.eval("return redis.call('INCR', KEYS[1])", 1, "k"),
        "trap used up",
      ).to.equal(3);
    });

    it("leaves requests the matcher rejects alone", async () => {
      const redis = connect();
      void proxy.dropNextReply(isEvalOf("nothing-like-this"));
      expect(await redis.eval("return 1", 0)).to.equal(1);
      expect(await redis.get("k")).to.equal(null);
    });

    it("drops every connection on demand, and ioredis reconnects", async () => {
      const redis = connect();
      let readies = 0;
      redis.on("ready", () => (readies += 1));
      await redis.ping();
      proxy.dropConnections();
      await eventually(() => readies === 2);
      expect(await redis.ping()).to.equal("PONG");
      expect(proxy.connections()).to.equal(1);
    });

    it("holds traffic while paused and delivers it on resume", async () => {
      const redis = connect();
      await redis.set("k", "v");
      proxy.pause();
      let got: string | null | undefined;
      const pending = redis.get("k").then((v) => (got = v));
      await eventually(() => proxy.held() > 0); // the GET reached the proxy, which holds it
      expect(got).to.equal(undefined);
      proxy.resume();
      await pending;
      expect(got).to.equal("v");
    });

    it("fails an armed trap when it closes", async () => {
      const fired = proxy.dropNextReply(() => true);
      await proxy.close();
      let error: unknown;
      await fired.catch((e: unknown) => (error = e));
      expect(String(error)).to.include("closed before the trap fired");
    });
  });

  describe("the local cluster", () => {
    const { connect, cluster } = useCluster(3, { replicas: 1 });

    /** A replica and its master, of a shard no earlier test in this block touched. */
    const shards: [NodeInfo, NodeInfo][] = [];
    const shard = async (i: number) => {
      if (shards.length === 0) {
        const [masters, replicas] = [await cluster().masters(), await cluster().replicas()];
        for (const master of masters) {
          shards.push([replicas.find((r) => r.masterId === master.id)!, master]);
        }
      }
      return shards[i]!;
    };
    const keyServedBy = (node: NodeInfo) => {
      if (node.slots.length === 0) throw new Error(`node ${node.port} serves no slot`);
      for (let i = 0; ; i++) {
        const slot = keySlot(`k${i}`);
        if (node.slots.some(([a, b]) => a <= slot && slot <= b)) return `k${i}`;
      }
    };
    /** Until the CLUSTER NODES view shows `port` as a replica of `masterId`. */
    const replicaOf = (port: number, masterId: string) =>
      eventually(
        async () =>
          (await cluster().replicas()).some((r) => r.port === port && r.masterId === masterId),
        20_000,
        `node ${port} to replicate ${masterId}`,
      );

    it("starts 3 masters, each with a replica, covering every slot", async () => {
      const [masters, replicas] = [await cluster().masters(), await cluster().replicas()];
      expect(masters).to.have.length(3);
      expect(replicas.map((r) => r.masterId)).to.have.members(masters.map((m) => m.id));
      const slots = masters.flatMap((m) => m.slots).reduce((n, [a, b]) => n + b - a + 1, 0);
      expect(slots).to.equal(16_384);
      expect(cluster().nodes).to.have.length(6);
    });

    it("computes key slots as CLUSTER KEYSLOT does", async () => {
      const admin = cluster().admin(cluster().nodes[0]!.port);
      const keys = ["", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap"];
      keys.push(
        "foo{bar}{zap}",
        "{}",
        "}{",
        "ключ{клю}",
        ...Array.from({ length: 50 }, (_, i) => `r:${i * 7919}`),
      );
      for (const key of keys) {
        expect(keySlot(key), key).to.equal(await admin.cluster("KEYSLOT", key));
      }
    });

    it("swaps a master and its replica on CLUSTER FAILOVER", async () => {
      const [replica, master] = await shard(0);
      const redis = connect();
      const key = keyServedBy(master);
      await redis.set(key, "v");
      await cluster().failover(replica.port);
      expect((await cluster().nodeForSlot(keySlot(key))).port).to.equal(replica.port);
      await replicaOf(master.port, replica.id);
      expect(await redis.get(key)).to.equal("v");
    });

    it("promotes a replica on CLUSTER FAILOVER FORCE", async () => {
      const [replica, master] = await shard(1);
      await cluster().failover(replica.port, "FORCE");
      expect((await cluster().masters()).map((m) => m.port)).to.include(replica.port);
      await replicaOf(master.port, replica.id);
    });

    it("replaces a SIGKILLed master with its replica; restarted, the old master replicates it", async () => {
      const [replica, master] = await shard(2);
      const redis = connect();
      const key = keyServedBy(master);
      const admin = cluster().admin(master.port);
      await admin.set(key, "v");
      expect(await admin.wait(1, 2_000), "the write reached the replica").to.equal(1);
      await cluster().kill(master.port);
      await eventually(
        async () => (await cluster().masters()).some((m) => m.port === replica.port),
        20_000,
        "the replica to take over",
      );
      await cluster().waitForOk();
      expect(await redis.get(key)).to.equal("v");

      await cluster().restart(master.port);
      await replicaOf(master.port, replica.id);
      await cluster().waitForOk();
      await cluster().waitForReplicas();
    });

    it("migrates a slot with its keys", async () => {
      const slot = keySlot("{m}");
      const from = await cluster().nodeForSlot(slot);
      const to = (await cluster().masters()).find((m) => m.id !== from.id)!;
      const redis = connect();
      const keys = Array.from({ length: 25 }, (_, i) => `{m}:${i}`);
      for (const key of keys) await redis.set(key, key);
      const batches: string[][] = [];
      const midway: (string | null)[] = [];
      await cluster().migrateSlot(slot, from.port, to.port, {
        onBatch: async (moved) => {
          batches.push(moved);
          for (const key of keys) midway.push(await redis.get(key)); // ASK for the moved ones
        },
      });
      expect(batches.map((b) => b.length)).to.deep.equal([10, 10, 5]);
      expect(midway).to.deep.equal([...keys, ...keys, ...keys]);
      expect((await cluster().nodeForSlot(slot)).id).to.equal(to.id);
      expect(await redis.mget(...keys), "a client with the old slot map").to.deep.equal(keys);
      expect(await connect().mget(...keys), "a new client").to.deep.equal(keys);
    });
  });
});
