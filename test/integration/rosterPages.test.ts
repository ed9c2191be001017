import { expect } from "chai";
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import { Redis } from "ioredis";
import { Rollcall, type Roster } from "../../src/index.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { assemble } from "../../src/protocol/replica.js";
import { snapshotOf } from "../../src/runtime/snapshots.js";
import { smallShards } from "../kit/clock.js";
import { Random } from "../kit/random.js";
import { IMMEDIATE, caughtUp, client, listen, ownRedis } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

/**
 * A Rollcall that runs `between` after each roster page it reads: rosterPages reads its pages
 * through roster(), so what `between` does happens between them.
 */
class Between extends Rollcall {
  between: (page: Roster, read: number) => Promise<void> = () => Promise.resolve();
  private pagesRead = 0;

  override async roster(room: string, options?: { cursor?: string }): Promise<Roster> {
    const page = await super.roster(room, options);
    await this.between(page, this.pagesRead++);
    return page;
  }
}

const listed = (pages: readonly Roster[]) => pages.flatMap((p) => p.members.map((m) => m.user));

/** Every member listed once; returns them. */
function distinct(pages: readonly Roster[]): string[] {
  const users = listed(pages);
  const twice = users.filter((u, i) => users.indexOf(u) !== i);
  expect(twice, "members listed on two pages").to.deep.equal([]);
  return users;
}

/** The room as one roster: the pages and the events between them (what a replica installs). */
async function assembled(pages: readonly Roster[], events: readonly PresenceEvent[]) {
  await caughtUp(events);
  const whole = assemble(pages.map(snapshotOf), events);
  expect(whole, "the pages and the events between them make one roster").to.not.equal(null);
  expect(whole!.members).to.have.length(whole!.count);
  return whole!;
}

/** What a quiet read says: the pages share one seq, and list exactly `count` members. */
async function quiet(rc: Rollcall, room: string) {
  const pages = await rc.rosterPages(room);
  expect(new Set(pages.map((p) => p.seq)).size, "one seq").to.equal(1);
  const users = distinct(pages);
  expect(users).to.have.length(pages[0]!.count);
  return { pages, users, count: pages[0]!.count, seq: pages[0]!.seq };
}

const ids = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, "0")}`);

async function joinAll(rc: Rollcall, room: string, users: readonly string[]): Promise<void> {
  for (let i = 0; i < users.length; i += 128) {
    const beats = users.slice(i, i + 128).map((user) => ({ room, user, connection: "c" }));
    for (const outcome of await rc.heartbeatMany(beats)) {
      if ("error" in outcome && outcome.error) throw outcome.error;
    }
  }
}

async function encoding(redis: Redis, key: string): Promise<string> {
  return String(await redis.call("OBJECT", "ENCODING", key));
}

/** How many fields a hash may hold in Redis's compact listpack encoding on this server. */
async function listpackEntries(redis: Redis): Promise<number> {
  const [, value] = await redis.config("GET", "hash-max-listpack-entries");
  return Number(value);
}

describe("rosterPages", () => {
  it("lists each member once, as many as the room counts, when its hash turns into a hash table between pages", async () => {
    const admin = client();
    const rc = new Between(client(), { ...IMMEDIATE, rosterLimit: 10 });
    const users = ids("u", 30);
    await joinAll(rc, "r", users);
    const [key] = rc.layout.room("r").keys;
    expect(await encoding(admin, key)).to.equal("listpack");
    rc.between = async (_page, read) => {
      if (read !== 0) return;
      // One member's connections make its record too long for a listpack: the hash becomes a
      // hash table, and the next page a scan of it from the start. Nothing is published.
      for (let c = 0; (await encoding(admin, key)) === "listpack"; c++) {
        expect(c, "connections added").to.be.below(60);
        await rc.heartbeat("r", users[0]!, `more-${c}`);
      }
    };
    const { pages, users: read, count } = await quiet(rc, "r");
    expect(pages.length).to.be.greaterThan(2);
    expect(count).to.equal(30);
    expect(read.sort()).to.deep.equal(users);
  });

  describe("with rooms sharded from 3 members and gathered back at 2", () => {
    before(() => smallShards(true));
    after(() => smallShards(false));

    it("lists each member once while the room moves into shards and back between pages", async () => {
      const rc = new Between(client(), { ...IMMEDIATE, rosterLimit: 1 });
      const events = await listen([rc.channel("r")]);
      await joinAll(rc, "r", ["a", "b"]);
      const [key] = rc.layout.room("r").keys;
      const admin = client();
      const fields: number[] = [];
      // Between the pages: into shards (4 members), a leave, back into the room's hash (2).
      const churn: (() => Promise<unknown>)[] = [
        () => joinAll(rc, "r", ["c", "d"]),
        () => rc.leave("r", "c", "c"),
        () => rc.leave("r", "d", "c"),
        () => joinAll(rc, "r", ["e"]),
      ];
      rc.between = async (_page, read) => {
        await churn[read]?.();
        fields.push(await admin.hlen(key));
      };
      const pages = await rc.rosterPages("r");
      const users = distinct(pages);
      // The room's own hash held its meta alone while sharded, and its records again after.
      expect(fields.slice(0, 3)).to.deep.equal([1, 1, 3]);
      expect(users.length).to.be.greaterThan(0);
      const whole = await assembled(pages, events);
      rc.between = () => Promise.resolve();
      const after = await quiet(rc, "r");
      expect(whole.members.map((m) => m.user)).to.deep.equal(after.users.sort());
      expect(whole).to.include({ seq: after.seq, count: after.count });
      expect(after.users).to.deep.equal(["a", "b", "e"]);
    });
  });

  // A room read by HSCAN throughout (a hash table), and one whose joins make it a hash table
  // between its pages (a listpack is read whole, by id, a page at a time; then HSCAN from the
  // start): either way with connection kills, joins and leaves between the pages.
  for (const { hash, beyond, joins } of [
    { hash: "a hash table", beyond: 40, joins: 8 },
    { hash: "a listpack that becomes a hash table", beyond: -30, joins: 14 },
  ]) {
    it(`lists each member once of ${hash}, one roster with its events, under churn and connection kills`, async () => {
      const admin = client();
      const redis = client();
      const entries = await listpackEntries(admin);
      const rc = new Between(redis, { ...IMMEDIATE, rosterLimit: Math.floor(entries / 8) });
      const users = ids("m", entries + beyond);
      await joinAll(rc, "big", users);
      const [key] = rc.layout.room("big").keys;
      expect(await encoding(admin, key)).to.equal(beyond > 0 ? "hashtable" : "listpack");
      const events = await listen([rc.channel("big")]);
      const random = new Random(6);
      let present = [...users];
      let joined = 0;
      let kills = 0;
      const kill = async () => {
        const id = String(await redis.client("ID"));
        expect(await admin.call("CLIENT", "KILL", "ID", id)).to.equal(1);
        kills += 1;
      };
      rc.between = async (page) => {
        if (page.cursor === null) return;
        await kill();
        for (let i = random.int(0, 6); i > 0; i--) {
          const user = random.pick(present);
          present = present.filter((u) => u !== user);
          await rc.leave("big", user, "c");
        }
        const newcomers = ids(`n${joined++}-`, random.int(0, joins));
        await joinAll(rc, "big", newcomers);
        present.push(...newcomers);
      };
      const pages = await rc.rosterPages("big");
      expect(await encoding(admin, key)).to.equal("hashtable");
      expect(kills, "connections killed between pages").to.be.greaterThan(5);
      expect(new Set(pages.map((p) => p.seq)).size, "pages of several seqs").to.be.greaterThan(3);
      const stayed = distinct(pages).filter((u) => present.includes(u));
      expect(stayed.length).to.be.greaterThan(users.length / 2);
      const whole = await assembled(pages, events);
      expect(whole.members.map((m) => m.user).sort()).to.deep.equal([...present].sort());

      // Kills alone, nothing published: the pages are the room, exactly.
      rc.between = async (page) => {
        if (page.cursor !== null) await kill();
      };
      const { users: quietly, count } = await quiet(rc, "big");
      expect(count).to.equal(present.length);
      expect(quietly.sort()).to.deep.equal([...present].sort());
    });
  }

  it("reads the room again, of one epoch, when Redis fails over between pages", async function () {
    this.timeout(60_000);
    const [a, b] = [await ownRedis(), await ownRedis()];
    const proxy = await proxyTo(Number(new URL(a.url).port));
    const redis = new Redis(`redis://127.0.0.1:${proxy.port}`);
    redis.on("error", () => undefined); // the failover drops its connection: it reconnects
    const [adminA, adminB] = [new Redis(a.url), new Redis(b.url)];
    const rc = new Between(redis, { ...IMMEDIATE, rosterLimit: 50 });
    try {
      // A hash grows past a listpack, then shrinks to 66 members: it stays a hash table on A.
      const users = ids("f", (await listpackEntries(adminA)) + 50);
      await joinAll(rc, "doc", users);
      for (const user of users.slice(66)) await rc.leave("doc", user, "c");
      const [key] = rc.layout.room("doc").keys;
      expect(await encoding(adminA, key)).to.equal("hashtable");
      // B replicates A from its snapshot, where a hash of 66 small records loads as a listpack.
      // The snapshot goes over the socket and is loaded from it: no file is written (the
      // servers' dir is the working directory, and every server started later would load it).
      await adminA.config("SET", "repl-diskless-sync", "yes");
      await adminA.config("SET", "repl-diskless-sync-delay", "0");
      await adminB.config("SET", "repl-diskless-load", "on-empty-db");
      await adminB.call("REPLICAOF", "127.0.0.1", new URL(a.url).port);
      await eventually(async () => {
        const info = await adminB.info("replication");
        return info.includes("master_link_status:up") && (await adminB.exists(key)) === 1;
      }, 20_000);
      expect(await encoding(adminB, key)).to.equal("listpack");
      let failedOver = false;
      rc.between = async (page) => {
        if (failedOver) return;
        failedOver = true;
        expect(page.cursor, "a scan's cursor on A").to.match(/^\d+$/);
        await adminB.call("REPLICAOF", "NO", "ONE");
        proxy.failover(Number(new URL(b.url).port));
      };
      const pages = await rc.rosterPages("doc");
      expect(failedOver).to.equal(true);
      expect(new Set(pages.map((p) => p.epoch)).size, "one epoch").to.equal(1);
      const read = distinct(pages);
      expect(read.sort()).to.deep.equal(users.slice(0, 66));
      expect(pages.every((p) => p.count === 66)).to.equal(true);
    } finally {
      for (const c of [redis, adminA, adminB]) c.disconnect();
      await proxy.close();
    }
  });
});

/** A TCP proxy on loopback to one Redis port, then (failover) another, as a failover moves clients. */
async function proxyTo(port: number) {
  let target = port;
  const sockets = new Set<Socket>();
  const server = createServer((downstream) => {
    const upstream = connect(target, "127.0.0.1");
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on("error", () => undefined);
      socket.on("close", () => {
        sockets.delete(socket);
        downstream.destroy();
        upstream.destroy();
      });
    }
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    failover(to: number) {
      target = to;
      for (const socket of sockets) socket.destroy();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
