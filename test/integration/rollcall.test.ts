import { expect } from "chai";
import type { PresenceEvent } from "../../src/protocol/events.js";
import { type Roster, Rollcall } from "../../src/index.js";
import { caughtUp, IMMEDIATE, client, listen, redisNow } from "../kit/redis.js";
import { advanceClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";

// Short windows so that expiry can be observed in a test.
const SHORT = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000 };

const summary = (events: PresenceEvent[]) =>
  events.map((e) => ("reason" in e ? `${e.type}:${e.user}:${e.reason}` : `${e.type}:${e.user}`));

async function setup(options = {}) {
  const rc = new Rollcall(client(), { ...IMMEDIATE, ...options });
  const events = await listen([rc.channel("room")]);
  return { rc, events };
}

describe("Rollcall", () => {
  describe("heartbeat and leave", () => {
    it("publishes join on the first heartbeat only", async () => {
      const { rc, events } = await setup();
      expect(await rc.heartbeat("room", "ann", "tab1")).to.deep.include({ joined: true });
      expect(await rc.heartbeat("room", "ann", "tab1")).to.deep.equal({
        joined: false,
        full: false,
        event: null,
      });
      await rc.heartbeat("room", "bob", "tab1");
      await caughtUp(events);
      expect(summary(events)).to.deep.equal(["join:ann", "join:bob"]);
      expect(events[1]).to.deep.include({ roster: ["ann", "bob"], count: 2 });
    });

    it("keeps a user with two connections present until the last one leaves", async () => {
      const { rc, events } = await setup();
      await rc.heartbeat("room", "ann", "tab1");
      await rc.heartbeat("room", "ann", "tab2");
      expect(await rc.leave("room", "ann", "tab1")).to.deep.equal({
        removed: true,
        left: false,
        leaving: false,
        event: null,
      });
      expect((await rc.roster("room")).members.map((m) => [m.user, m.connections])).to.deep.equal([
        ["ann", 1],
      ]);
      expect(await rc.leave("room", "ann", "tab2")).to.deep.include({ removed: true, left: true });
      expect(await rc.leave("room", "ann", "tab2")).to.deep.equal({
        removed: false,
        left: false,
        leaving: false,
        event: null,
      });
      await caughtUp(events);
      expect(summary(events)).to.deep.equal(["join:ann", "leave:ann:explicit"]);
      expect(events[1]).to.deep.include({ roster: [], count: 0 });
    });

    it("announces the overdue leave before the join when a stale user comes back", async () => {
      const { rc, events } = await setup(SHORT);
      await rc.heartbeat("room", "ann", "tab1");
      await rc.startTyping("room", "ann");
      await advanceClock(rc.redis, rc, 1_100);
      expect((await rc.heartbeat("room", "ann", "tab1")).joined).to.equal(true);
      await eventually(() => events.length === 5);
      expect(summary(events)).to.deep.equal([
        "join:ann",
        "typing-start:ann",
        "typing-stop:ann:expired",
        "leave:ann:expired",
        "join:ann",
      ]);
    });

    it("drops a user's silent connection without a leave while another one lives", async () => {
      const { rc, events } = await setup({ ...SHORT, presenceWindowMs: 2_000, keyTtlMs: 6_000 });
      await rc.heartbeat("room", "ann", "dead-tab");
      await advanceClock(rc.redis, rc, 1_200);
      await rc.heartbeat("room", "ann", "live-tab");
      await advanceClock(rc.redis, rc, 1_200); // dead-tab silent 2.4 s, live-tab 1.2 s, in a 2 s window
      expect(await rc.sweepRoom("room")).to.deep.include({
        connections: 1,
        leaves: 0,
        typingStops: 0,
      });
      const [ann] = (await rc.roster("room")).members;
      expect(ann).to.deep.include({ user: "ann", connections: 1 });
      await caughtUp(events);
      expect(summary(events)).to.deep.equal(["join:ann"]);
    });

    it("holds at most 64 connections per user, replacing the one silent the longest", async () => {
      const { rc, events } = await setup();
      const admin = client();
      for (let i = 0; i < 70; i++) {
        await rc.heartbeat("room", "ann", `tab${i}`);
        // Distinct heartbeat times, so "silent the longest" is one connection.
        const beat = await redisNow(admin);
        await eventually(async () => (await redisNow(admin)) > beat);
      }
      await rc.heartbeat("room", "ann", "tab69");
      expect((await rc.roster("room")).members[0]!.connections).to.equal(64);
      expect((await rc.leave("room", "ann", "tab5")).removed).to.equal(false);
      expect((await rc.leave("room", "ann", "tab6")).removed).to.equal(true);
      await caughtUp(events);
      expect(summary(events)).to.deep.equal(["join:ann"]);
    });

    it("chains every event of a room to the one before it", async () => {
      const { rc, events } = await setup();
      await rc.heartbeat("room", "ann", "c");
      await rc.heartbeat("room", "bob", "c");
      await rc.startTyping("room", "bob");
      await rc.setState("room", "ann", { status: "away" });
      await rc.leave("room", "bob", "c");
      await rc.leave("room", "ann", "c");
      await rc.heartbeat("room", "cy", "c");
      await eventually(() => events.length === 8);
      expect(events.map((e) => e.type)).to.deep.equal([
        "join",
        "join",
        "typing-start",
        "update",
        "typing-stop",
        "leave",
        "leave",
        "join",
      ]);
      expect(events[0]!.prev).to.equal(0);
      for (let i = 1; i < 7; i++) expect(events[i]!.prev).to.equal(events[i - 1]!.seq);
      // The room emptied: the next event starts a new chain, with a larger seq.
      expect(events[7]!.prev).to.equal(0);
      expect(events[7]!.seq).to.be.greaterThan(events[6]!.seq);
    });
  });

  describe("typing", () => {
    it("publishes start and stop only on transitions", async () => {
      const { rc, events } = await setup();
      await rc.heartbeat("room", "ann", "c");
      expect(await rc.startTyping("room", "ann")).to.deep.include({ present: true, started: true });
      expect(await rc.startTyping("room", "ann")).to.deep.include({
        present: true,
        started: false,
      });
      expect((await rc.roster("room")).typing).to.deep.equal(["ann"]);
      expect((await rc.stopTyping("room", "ann")).stopped).to.equal(true);
      expect((await rc.stopTyping("room", "ann")).stopped).to.equal(false);
      expect((await rc.roster("room")).typing).to.deep.equal([]);
      await caughtUp(events);
      expect(summary(events)).to.deep.equal([
        "join:ann",
        "typing-start:ann",
        "typing-stop:ann:explicit",
      ]);
    });

    it("ignores typing by a user who is not present", async () => {
      const { rc, events } = await setup();
      expect(await rc.startTyping("room", "ghost")).to.deep.equal({
        present: false,
        started: false,
        event: null,
      });
      expect((await rc.roster("room")).count).to.equal(0);
      await caughtUp(events);
      expect(events).to.deep.equal([]);
    });

    it("stops the typing of a user who leaves, before the leave", async () => {
      const { rc, events } = await setup();
      await rc.heartbeat("room", "ann", "c");
      await rc.startTyping("room", "ann");
      await rc.leave("room", "ann", "c");
      await eventually(() => events.length === 4);
      expect(summary(events)).to.deep.equal([
        "join:ann",
        "typing-start:ann",
        "typing-stop:ann:left",
        "leave:ann:explicit",
      ]);
    });

    it("expires a typist after the typing window, leaving presence alone", async () => {
      const { rc, events } = await setup(SHORT);
      await rc.heartbeat("room", "ann", "c");
      await rc.startTyping("room", "ann");
      expect((await rc.sweepRoom("room")).typingStops).to.equal(0); // not yet
      await advanceClock(rc.redis, rc, SHORT.typingWindowMs + 1);
      expect(await rc.sweepRoom("room")).to.deep.include({
        connections: 0,
        leaves: 0,
        typingStops: 1,
      });
      expect(await rc.sweepRoom("room")).to.deep.include({
        connections: 0,
        leaves: 0,
        typingStops: 0,
      });
      const roster = await rc.roster("room");
      expect(roster.typing).to.deep.equal([]);
      expect(roster.count).to.equal(1);
      await eventually(() => events.length === 3);
      expect(summary(events)).to.deep.equal([
        "join:ann",
        "typing-start:ann",
        "typing-stop:ann:expired",
      ]);
    });
  });

  describe("member state", () => {
    it("rides the join, then publishes one update per real change", async () => {
      const { rc, events } = await setup();
      await rc.heartbeat("room", "ann", "c", { state: { status: "online", device: "web" } });
      await rc.heartbeat("room", "ann", "c", { state: { device: "web", status: "online" } });
      await rc.heartbeat("room", "ann", "c");
      await rc.heartbeat("room", "ann", "c", { state: { status: "away", device: "web" } });
      expect(await rc.setState("room", "ann", { device: "web", status: "away" })).to.deep.include({
        present: true,
        updated: false,
      });
      expect(await rc.setState("room", "ann", { status: "busy" })).to.deep.include({
        present: true,
        updated: true,
      });
      expect(await rc.setState("room", "bob", { status: "busy" })).to.deep.include({
        present: false,
      });
      await caughtUp(events);
      expect(events.map((e) => [e.type, "state" in e ? e.state : undefined])).to.deep.equal([
        ["join", { device: "web", status: "online" }],
        ["update", { device: "web", status: "away" }],
        ["update", { status: "busy" }],
      ]);
      expect((await rc.roster("room")).members[0]!.state).to.deep.equal({ status: "busy" });
    });
  });

  describe("roster", () => {
    it("is one snapshot with the sequence number of the last event", async () => {
      const { rc, events } = await setup();
      await rc.heartbeat("room", "ann", "c1", { state: { status: "online" } });
      await rc.heartbeat("room", "ann", "c2");
      await rc.heartbeat("room", "bob", "c1");
      await rc.startTyping("room", "bob");
      await eventually(() => events.length === 3);
      const roster = await rc.roster("room");
      expect(roster.seq).to.equal(events[2]!.seq);
      expect(roster.count).to.equal(2);
      expect(roster.typing).to.deep.equal(["bob"]);
      expect(
        roster.members.map(({ user, connections, state }) => ({ user, connections, state })),
      ).to.deep.equal([
        { user: "ann", connections: 2, state: { status: "online" } },
        { user: "bob", connections: 1, state: null },
      ]);
      const bob = roster.members[1]!;
      expect(bob.typedAt).to.be.a("number").and.at.least(bob.joinedAt);
    });

    it("lists at most rosterLimit members and counts them all", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, rosterLimit: 3 });
      for (const user of ["a", "b", "c", "d", "e"]) await rc.heartbeat("room", user, "c");
      const roster = await rc.roster("room");
      expect(roster.count).to.equal(5);
      expect(roster.members.map((m) => m.user)).to.deep.equal(["a", "b", "c"]);
    });

    it("pages a room past rosterLimit: every member listed once, pages by id while it is compact", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, rosterLimit: 7 });
      const users = Array.from({ length: 30 }, (_, i) => `u${String(i).padStart(2, "0")}`);
      await rc.heartbeatMany(users.map((user) => ({ room: "room", user, connection: "c" })));
      const pages = [];
      let cursor: string | null = "";
      while (cursor !== null) {
        const page: Roster = await rc.roster("room", cursor === "" ? {} : { cursor });
        pages.push(page);
        cursor = page.cursor;
      }
      expect(pages.map((p) => p.members.length)).to.deep.equal([7, 7, 7, 7, 2]);
      expect(pages.flatMap((p) => p.members.map((m) => m.user))).to.deep.equal(users);
      expect(new Set(pages.map((p) => `${p.seq}/${p.count}`))).to.deep.equal(new Set(["30/30"]));
    });

    it("pages a big room with HSCAN: members present throughout all listed while others come and go", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, rosterLimit: 200 });
      const stay = Array.from({ length: 1_000 }, (_, i) => `stay${i}`);
      const churn = Array.from({ length: 400 }, (_, i) => `churn${i}`);
      const beat = (user: string) => ({ room: "big", user, connection: "c" });
      await rc.heartbeatMany([...stay, ...churn.slice(0, 200)].map(beat));
      const seen = new Set<string>();
      const seqs: number[] = [];
      let cursor: string | null = "";
      for (let page = 0; cursor !== null; page++) {
        const r: Roster = await rc.roster("big", cursor === "" ? {} : { cursor });
        r.members.forEach((m) => seen.add(m.user));
        seqs.push(r.seq);
        cursor = r.cursor;
        // Between pages, some leave and others join.
        await rc.leave("big", churn[page]!, "c");
        await rc.heartbeat("big", churn[200 + page]!, "c");
      }
      expect(stay.filter((user) => !seen.has(user))).to.deep.equal([]);
      expect(seqs.length).to.be.greaterThan(4);
      // Each page names the seq it is consistent with: they grow with the churn between pages.
      expect([...seqs].sort((a, b) => a - b)).to.deep.equal(seqs);
      expect(seqs[0]).to.be.lessThan(seqs.at(-1)!);
    });

    it("moves a room of 1,024 members into shards and back at 512, every record kept", async () => {
      const rc = new Rollcall(client(), IMMEDIATE);
      const users = Array.from({ length: 1_100 }, (_, i) => `user-${i}`);
      const beat = (user: string) => ({ room: "huge", user, connection: "c", state: { i: 1 } });
      for (let i = 0; i < users.length; i += 128) {
        await rc.heartbeatMany(users.slice(i, i + 128).map(beat));
      }
      const [own] = rc.layout.room("huge").keys;
      // The room's own hash holds its meta alone; its members are in 32 others.
      expect(await rc.redis.hlen(own)).to.equal(1);
      const shards = await Promise.all(
        Array.from({ length: 32 }, (_, k) => rc.redis.hlen(rc.layout.shard("huge", k))),
      );
      expect(shards.reduce((a, b) => a + b, 0)).to.equal(1_100);
      expect(Math.min(...shards)).to.be.greaterThan(0);
      const listed = async () => (await rc.rosterPages("huge")).flatMap((p) => p.members);
      const before = await listed();
      expect(before.map((m) => m.user).sort()).to.deep.equal([...users].sort());
      expect(before.every((m) => m.connections === 1 && m.state?.["i"] === 1)).to.equal(true);
      // Heartbeats find records in their shards: steady, and nothing published.
      const steady = await rc.heartbeatMany(
        users.slice(0, 128).map((u) => ({ room: "huge", user: u, connection: "c" })),
      );
      expect(steady.every((r) => !r.error && !r.joined && r.event === null)).to.equal(true);
      for (const user of users.slice(0, 587)) await rc.leave("huge", user, "c");
      expect(await rc.redis.hlen(own), "sharded while above 512").to.equal(1);
      await rc.leave("huge", users[587]!, "c");
      expect(await rc.redis.hlen(own), "gathered back at 512").to.equal(513);
      const shardKeys = Array.from({ length: 32 }, (_, k) => rc.layout.shard("huge", k));
      expect(await rc.redis.exists(...shardKeys)).to.equal(0);
      const after = await listed();
      expect(after.map((m) => m.user).sort()).to.deep.equal(users.slice(588).sort());
      expect((await rc.count("huge")).users).to.equal(512);
    });

    it("pages a sharded room a few shards at a time, each page consistent with its seq", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, rosterLimit: 300 });
      const users = Array.from({ length: 2_000 }, (_, i) => `u${i}`);
      for (let i = 0; i < users.length; i += 128) {
        await rc.heartbeatMany(
          users.slice(i, i + 128).map((user) => ({ room: "s", user, connection: "c" })),
        );
      }
      const pages: Roster[] = [];
      for (let cursor: string | null = ""; cursor !== null; cursor = pages.at(-1)!.cursor) {
        pages.push(await rc.roster("s", cursor === "" ? {} : { cursor }));
        // Between pages, a member of every shard leaves and another joins.
        await rc.leave("s", users[pages.length]!, "c");
        await rc.heartbeat("s", `late${pages.length}`, "c");
      }
      // The first read finds the room sharded (a read of its own hash) and reads its shards.
      expect(pages.length).to.be.within(7, 40);
      expect(pages.every((p) => p.members.length < 300 * 1.6)).to.equal(true);
      const seen = new Set(pages.flatMap((p) => p.members.map((m) => m.user)));
      const stayed = users.slice(pages.length + 1);
      expect(stayed.filter((u) => !seen.has(u))).to.deep.equal([]);
      const seqs = pages.map((p) => p.seq);
      expect([...seqs].sort((a, b) => a - b)).to.deep.equal(seqs);
    });

    it("lists every member present throughout while a room moves into shards between pages", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, rosterLimit: 100 });
      const users = Array.from({ length: 1_000 }, (_, i) => `m${String(i).padStart(4, "0")}`);
      for (let i = 0; i < users.length; i += 128) {
        await rc.heartbeatMany(
          users.slice(i, i + 128).map((user) => ({ room: "grow", user, connection: "c" })),
        );
      }
      const first = await rc.roster("grow");
      expect(first.cursor).to.match(/^\d+$/);
      // 24 joins take it past 1,024 members: the rest is in shards.
      for (let i = 0; i < 24; i++) await rc.heartbeat("grow", `new${i}`, "c");
      const pages = [first];
      for (let cursor = first.cursor; cursor !== null; cursor = pages.at(-1)!.cursor) {
        pages.push(await rc.roster("grow", { cursor }));
      }
      expect(pages.slice(1).some((p) => p.cursor?.startsWith("s"))).to.equal(true);
      const seen = new Set(pages.flatMap((p) => p.members.map((m) => m.user)));
      expect(users.filter((u) => !seen.has(u))).to.deep.equal([]);
      expect(pages.at(-1)!.count).to.equal(1_024);
    });

    it("carries at most eventRosterLimit users in join events, with the exact count", async () => {
      const { rc, events } = await setup({ eventRosterLimit: 2 });
      for (const user of ["a", "b", "c"]) await rc.heartbeat("room", user, "c");
      await eventually(() => events.length === 3);
      expect(events[2]).to.deep.include({ roster: ["a", "b"], count: 3 });
    });

    it("keeps rooms apart, even when they share a bucket", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, buckets: 1 });
      await rc.heartbeat("r", "ann", "c");
      await rc.heartbeat("r2", "bob", "c");
      await rc.heartbeat("r ", "cy", "c");
      expect((await rc.roster("r")).members.map((m) => m.user)).to.deep.equal(["ann"]);
      expect((await rc.roster("r2")).members.map((m) => m.user)).to.deep.equal(["bob"]);
      expect((await rc.roster("r ")).members.map((m) => m.user)).to.deep.equal(["cy"]);
    });
  });
});
