import { expect } from "chai";
import { SocketPresence } from "../../src/client/socketio.js";
import { asReplica } from "../kit/rosters.js";
import { redisUrl } from "../kit/redis.js";
import { connectIo, heard, startIo, type IoClient, type IoInstance } from "../kit/socketio.js";
import { eventually } from "../kit/wait.js";

describe("rollcall/socket.io", () => {
  const instances: IoInstance[] = [];
  const clients: IoClient[] = [];

  async function instance(config: Parameters<typeof startIo>[0] = {}): Promise<IoInstance> {
    const started = await startIo({ redisUrl: redisUrl(), adapter: true, ...config });
    instances.push(started);
    return started;
  }

  function user(at: IoInstance, name: string | null): IoClient {
    const c = connectIo(at.url, name);
    clients.push(c);
    return c;
  }

  afterEach(async () => {
    for (const c of clients.splice(0)) c.socket.disconnect();
    await Promise.all(instances.splice(0).map((i) => i.close()));
  });

  it("shows a client on A the joins, typing, state and leaves of a user on B, each once", async () => {
    const [a, b] = [await instance(), await instance()];
    const ann = user(a, "ann");
    const replicas = new SocketPresence(ann.socket);
    await ann.join("doc");
    await eventually(() => ann.snapshots.length === 1);
    const bob = user(b, "bob");
    await bob.join("doc");
    await eventually(() => heard(ann, "doc").includes("join:bob"));
    expect(await bob.call("rollcall:typing", "doc")).to.deep.equal({ ok: true });
    expect(await bob.call("rollcall:state", "doc", { status: "away" })).to.deep.equal({ ok: true });
    await eventually(() => heard(ann, "doc").includes("update:bob"));
    expect(replicas.roster("doc")?.members.find((m) => m.user === "bob")?.state).to.deep.equal({
      status: "away",
    });
    expect(replicas.roster("doc")?.typing).to.deep.equal(["bob"]);
    await bob.leave("doc");
    await eventually(() => heard(ann, "doc").includes("leave:bob"));
    // ann's own join is in her snapshot, or an event after it, as the race went.
    expect(heard(ann, "doc").filter((line) => line !== "join:ann")).to.deep.equal([
      "join:bob",
      "typing-start:bob",
      "update:bob",
      "typing-stop:bob",
      "leave:bob",
    ]);
    // The chain is unbroken: each event follows the last, in the snapshot's epoch.
    const [snapshot] = ann.snapshots;
    let prev = snapshot!.seq;
    for (const event of ann.events.filter((e) => e.seq > snapshot!.seq)) {
      expect(event.epoch).to.equal(snapshot!.epoch);
      expect(event.prev).to.equal(prev);
      prev = event.seq;
    }
    expect(replicas.roster("doc")).to.deep.equal(asReplica(await a.rollcall.roster("doc")));
    expect(a.errors.concat(b.errors)).to.deep.equal([]);
  });
});
