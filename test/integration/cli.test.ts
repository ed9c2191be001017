import { expect } from "chai";
import { Redis } from "ioredis";
import { spawn, type ChildProcess } from "node:child_process";
import { Rollcall, type Roster, type UserStatus } from "../../src/index.js";
import { buildDist, expectBuilt, ROOT } from "../kit/build.js";
import { useCluster } from "../kit/cluster.js";
import { freePort } from "../kit/ports.js";
import { IMMEDIATE, client, listen, ownRedis, redisUrl } from "../kit/redis.js";
import { advanceClock } from "../kit/clock.js";
import { redisWith, stopRedisWith } from "../kit/redisWith.js";
import { eventually } from "../kit/wait.js";

// Every test runs the built binary, as `npx rollcall` would, against the test's Redis.
const MAIN = `${ROOT}dist/cli/main.js`;
// Windows and a key TTL longer than any test takes, however slow the machine: nothing a test
// writes becomes due or expires while the CLI starts and reads it (the CLI runs on Redis's own
// clock, and the keys' TTL is real time). A test that wants something overdue writes it in the
// past: advanceClock back moves the clock of the test's Rollcalls, not the CLI's.
const OPTIONS = { presenceWindowMs: 60_000, typingWindowMs: 30_000, keyTtlMs: 600_000 };
/** The CLI's flags for OPTIONS with IMMEDIATE's leave grace: settings that agree. */
const AGREEING = [
  "--presence-window-ms",
  "60000",
  "--typing-window-ms",
  "30000",
  "--key-ttl-ms",
  "600000",
  "--leave-grace-ms",
  "0",
];

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a process, killed after 20 s: a hang fails the test, not the run. */
function start(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [MAIN, ...args], {
    env: { ...process.env, REDIS_URL: redisUrl(), NO_COLOR: "1", ...env },
    timeout: 20_000,
    killSignal: "SIGKILL",
  });
}

/** The CLI as a running process, its output collected as it comes. */
function follow(args: string[], env?: Record<string, string>) {
  const child = start(args, env);
  const output = { stdout: "", stderr: "" };
  child.stdout!.on("data", (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output.stderr += chunk.toString()));
  /** Settles with the exit code once the output is complete. */
  const closed = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  });
  return { child, output, closed };
}

/** Runs the CLI to its end. */
async function cli(args: string[], env?: Record<string, string>): Promise<Result> {
  const { output, closed } = follow(args, env);
  const code = await closed;
  return { code, ...output };
}

async function json<T>(args: string[]): Promise<T> {
  const { code, stdout, stderr } = await cli(args);
  expect(code, stderr).to.equal(0);
  return JSON.parse(stdout) as T;
}

interface Counts {
  rooms: number;
  users: number;
  connections: number;
  typing: number;
  backlog: number;
  lagMs: number | null;
}
interface Stats {
  buckets: (Counts & { bucket: number; epoch: string | null; events: number })[];
  total: Counts;
}

/** Three rooms: ann (two connections, typing) and bob in one; cy and dee alone in the others. */
async function populate(rc: Rollcall): Promise<void> {
  await rc.heartbeat("doc-42", "ann", "ann-laptop", { state: { status: "online" } });
  await rc.heartbeat("doc-42", "ann", "ann-phone");
  await rc.heartbeat("doc-42", "bob", "bob-1");
  await rc.startTyping("doc-42", "ann");
  await rc.heartbeat("doc-7", "cy", "cy-1");
  await rc.heartbeat("lobby", "dee", "dee-1");
}

/**
 * ann online in doc-42, bob seen five minutes ago in doc-7, as the CLI (on Redis's own clock)
 * sees it; their changes applied to their status.
 */
async function statuses(rc: Rollcall): Promise<void> {
  await advanceClock(rc.redis, rc, -300_000);
  await rc.heartbeat("doc-42", "ann", "ann-1");
  await rc.heartbeat("doc-7", "bob", "bob-1");
  await rc.leave("doc-7", "bob", "bob-1");
  await rc.applyUserChanges(rc.bucketOf("doc-42"));
  await rc.applyUserChanges(rc.bucketOf("doc-7"));
}

describe("the rollcall CLI", function () {
  before(async function () {
    this.timeout(120_000);
    await buildDist();
    expectBuilt("cli");
  });

  describe("roster", () => {
    it("prints the room's members as a table, with count, epoch and seq", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      await populate(rc);
      const { epoch, seq } = await rc.roster("doc-42");

      const { code, stdout, stderr } = await cli(["roster", "doc-42"]);
      expect(code, stderr).to.equal(0);
      expect(stderr).to.equal("");
      const [title, header, ...rows] = stdout.trimEnd().split("\n");
      expect(title).to.equal(`doc-42: 2 present, 1 typing (epoch ${epoch}, seq ${seq})`);
      expect(header).to.match(/^user +connections +last seen +joined +typing +state$/);
      expect(rows).to.have.length(2);
      expect(rows[0]).to.match(
        /^ann +2 +[\d.]+m?s ago +[\d.]+m?s ago +yes \([\d.]+m?s ago\) +\{"status":"online"\}$/,
      );
      expect(rows[1]).to.match(/^bob +1 +[\d.]+m?s ago +[\d.]+m?s ago +- +-$/);
    });

    it("prints roster() as JSON with --json", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      await populate(rc);
      // Read a moment apart: all but the time of the read agrees.
      const { at: printedAt, ...printed } = await json<Roster>(["roster", "doc-42", "--json"]);
      const { at, ...direct } = await rc.roster("doc-42");
      expect(printed).to.deep.equal(direct);
      expect(printedAt).to.be.within(at - 60_000, at);
      expect(await json<Roster>(["--json", "roster", "empty-room"])).to.include({
        room: "empty-room",
        count: 0,
      });
    });

    it("refuses a Redis where no deployment is stored (exit 2), storing nothing", async () => {
      const { code, stdout, stderr } = await cli(["roster", "doc-42"]);
      expect(code).to.equal(2);
      expect(stdout).to.equal("");
      expect(stderr).to.equal(
        "rollcall: no deployment here: rollcall:deployment is empty (no rollcall instance has run " +
          "with prefix rollcall; see --prefix, --redis, --cluster)\n",
      );
      expect(await client().exists("rollcall:deployment")).to.equal(0);
    });

    it("reads the deployment under --prefix", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, prefix: "app.presence" });
      await rc.heartbeat("doc-42", "ann", "c1");
      const { code, stdout } = await cli(["--prefix", "app.presence", "roster", "doc-42"]);
      expect(code).to.equal(0);
      expect(stdout).to.match(/^doc-42: 1 present, 0 typing/);
    });
  });

  describe("status", () => {
    it("prints each user's status as a table: online since, last seen and how long ago, never seen", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, userStatus: true });
      await statuses(rc);
      const [ann, bob] = await rc.status(["ann", "bob"]);
      expect(ann).to.include({ online: true, lastSeenAt: null });
      expect(bob).to.include({ online: false, since: null });

      const { code, stdout, stderr } = await cli(["status", "ann", "bob", "cy"]);
      expect(code, stderr).to.equal(0);
      expect(stderr).to.equal("");
      const [header, ...rows] = stdout.trimEnd().split("\n");
      expect(header).to.match(/^user +online +since +last seen$/);
      const iso = (at: number | null) => new Date(at!).toISOString();
      // Columns are two spaces apart or more; a cell holds single spaces at most.
      const cells = rows.map((row) => row.split(/ {2,}/));
      expect(cells).to.have.length(3);
      expect(cells[0]).to.deep.equal(["ann", "yes", iso(ann!.since), "-"]);
      expect(cells[1]!.slice(0, 3)).to.deep.equal(["bob", "no", "-"]);
      // Five minutes ago, and the few seconds the test took since.
      expect(cells[1]![3]).to.match(new RegExp(`^${iso(bob!.lastSeenAt)} \\(5m\\d\\ds ago\\)$`));
      expect(cells[2]).to.deep.equal(["cy", "no", "-", "never"]);
    });

    it("prints status() as JSON with --json, up to 500 users", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, userStatus: true });
      await statuses(rc);
      const users = ["ann", "bob", "cy"];
      const printed = await json<UserStatus[]>(["status", "--json", ...users]);
      expect(printed).to.deep.equal(await rc.status(users));
      expect(printed.map((s) => s.online)).to.deep.equal([true, false, false]);

      const many = Array.from({ length: 500 }, (_, i) => `u${i}`);
      const all = await json<UserStatus[]>(["status", ...many, "--json"]);
      expect(all.map((s) => s.user)).to.deep.equal(many);
    });

    it("refuses no user and more than 500 (usage errors), and a malformed id (exit 2)", async function () {
      // Four runs of the CLI, each killed after 20 s: the runs bound the test.
      this.timeout(4 * 20_000);
      await new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, userStatus: true }).ready();
      const none = await cli(["status", "--json"]);
      expect(none.code).to.equal(2);
      expect(none.stdout).to.equal("");
      expect(none.stderr).to.equal(
        "rollcall: status takes USER...\nRun rollcall --help for the usage.\n",
      );

      const tooMany = await cli(["status", ...Array.from({ length: 501 }, (_, i) => `u${i}`)]);
      expect(tooMany.code).to.equal(2);
      expect(tooMany.stdout).to.equal("");
      expect(tooMany.stderr).to.equal(
        "rollcall: status takes at most 500 users, got 501\nRun rollcall --help for the usage.\n",
      );

      for (const [id, why] of [
        ["", "user id must be a non-empty string"],
        ["ann\tbob", "user id must not contain control characters"],
      ]) {
        const bad = await cli(["status", "ann", id!]);
        expect(bad.code, bad.stderr).to.equal(2);
        expect(bad.stdout).to.equal("");
        expect(bad.stderr).to.equal(`rollcall: ${why}\n`);
      }
    });
  });

  describe("stats", () => {
    it("counts rooms, users, connections and typists; overdue rooms are a backlog with a lag", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      // Written a window and 200 ms ago, as the CLI (on Redis's own clock) sees it: no sweeper
      // runs, so every room is overdue and still lists its members.
      const written = performance.now();
      await advanceClock(rc.redis, rc, -(OPTIONS.presenceWindowMs + 200));
      await populate(rc);
      const counters = await Promise.all(
        Array.from({ length: rc.layout.buckets }, (_, b) =>
          client().hmget(rc.layout.seq(b), "n", "epoch"),
        ),
      );

      const fresh = await json<Stats>(["stats", "--json"]);
      expect(fresh.total).to.include({ rooms: 3, users: 4, connections: 5, typing: 1 });
      expect(fresh.buckets).to.have.length(16);
      for (const [i, bucket] of fresh.buckets.entries()) {
        const [n, epoch] = counters[i]!;
        expect(bucket).to.include({ bucket: i, events: Number(n ?? 0), epoch: epoch ?? null });
      }
      const sum = (key: "rooms" | "users" | "connections" | "typing") =>
        fresh.buckets.reduce((total, b) => total + b[key], 0);
      expect([sum("rooms"), sum("users"), sum("connections"), sum("typing")]).to.deep.equal([
        3, 4, 5, 1,
      ]);

      const overdue = await json<Stats>(["stats", "--json"]);
      expect(overdue.total).to.include({ rooms: 3, users: 4, connections: 5, backlog: 3 });
      // The oldest deadline is ann's typing mark's, written a window and 200 ms ago: overdue by
      // that less the typing window, and by the time the test has taken since (however slow).
      const lag = OPTIONS.presenceWindowMs + 200 - OPTIONS.typingWindowMs;
      expect(overdue.total.lagMs).to.be.within(lag, lag + (performance.now() - written) + 10);
      const lagging = overdue.buckets.filter((b) => b.lagMs !== null);
      expect(lagging.map((b) => b.backlog).reduce((a, b) => a + b)).to.equal(3);
      expect(Math.max(...lagging.map((b) => b.lagMs!))).to.equal(overdue.total.lagMs);

      const { code, stdout } = await cli(["stats"]);
      expect(code).to.equal(0);
      const lines = stdout.trimEnd().split("\n");
      expect(lines[0]).to.match(
        /^bucket +rooms +users +connections +typing +backlog +lag +events +epoch$/,
      );
      expect(lines).to.have.length(1 + 16 + 1);
      expect(lines.at(-1)).to.match(/^ +total +3 +4 +5 +1 +3 +\d\S*s$/);
    });
  });

  describe("sweep", () => {
    it("runs one pass and announces the expired leave", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      // A window and 100 ms ago, as the CLI sees it.
      await advanceClock(rc.redis, rc, -(OPTIONS.presenceWindowMs + 100));
      await rc.heartbeat("doc-42", "ann", "c1");
      const events = await listen([rc.channel("doc-42")]);

      const { code, stdout, stderr } = await cli(["sweep"]);
      expect(code, stderr).to.equal(0);
      expect(stdout).to.match(
        /^swept 1 room in \S+ \(\d+ calls\): 1 connection expired, 1 leave, 0 typing stops announced\n$/,
      );
      expect((await rc.roster("doc-42")).count).to.equal(0);
      await eventually(() => events.length === 1);
      expect(events[0]).to.include({ type: "leave", user: "ann", reason: "expired", count: 0 });

      const again = await cli(["sweep"]);
      expect(again.stdout).to.match(/^swept 0 rooms .*0 leaves/);
    });
  });

  describe("check", () => {
    it("exits 0 when the given settings agree with the stored ones", async () => {
      await new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS }).ready();
      const { code, stdout } = await cli(["check", ...AGREEING]);
      expect(code).to.equal(0);
      expect(stdout).to.equal("the settings agree with rollcall:deployment\n");
    });

    it("exits 1 and prints each difference when they differ (defaults for what is not given)", async () => {
      await new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS }).ready();
      const given = [
        "--presence-window-ms",
        "90000",
        "--typing-window-ms",
        "30000",
        "--buckets",
        "8",
      ];
      const { code, stdout } = await cli(["check", ...given]);
      expect(code).to.equal(1);
      expect(stdout.trimEnd().split("\n")).to.deep.equal([
        'the settings differ from rollcall:deployment ("there" is stored, "here" given):',
        "  buckets is 16 there, 8 here",
        "  presenceWindowMs is 60000 there, 90000 here",
        "  keyTtlMs is 600000 there, 86400000 here",
        "  leaveGraceMs is 0 there, 5000 here",
      ]);
    });

    it("tells a deployment that keeps users' status from one that does not (--user-status)", async () => {
      await new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, userStatus: true }).ready();
      const without = await cli(["check", ...AGREEING]);
      expect(without.code).to.equal(1);
      expect(without.stdout).to.include("  userStatus is true there, missing here\n");
      const agreeing = await cli(["check", ...AGREEING, "--user-status"]);
      expect(agreeing.code, agreeing.stdout).to.equal(0);
    });

    it("exits 0 with a note when nothing is stored yet, and stores nothing", async () => {
      const { code, stdout } = await cli(["check", "--buckets", "8"]);
      expect(code).to.equal(0);
      expect(stdout).to.equal(
        "nothing stored in rollcall:deployment yet: the first instance to start stores its settings\n",
      );
      expect(await client().exists("rollcall:deployment")).to.equal(0);
    });

    it("reconciles the counts with --reconcile: a room whose keys expired unannounced is no longer counted", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      await rc.heartbeat("doc-1", "ann", "c1");
      await rc.heartbeat("doc-1", "ann", "c2");
      await rc.heartbeat("doc-2", "bob", "c1");
      // What the safety-net expiry does to a room nobody swept: its keys go, unannounced.
      await client().del(rc.layout.room("doc-1").keys[0]);
      const { code, stdout } = await cli(["check", ...AGREEING, "--reconcile"]);
      expect(code).to.equal(0);
      expect(stdout.trimEnd().split("\n")).to.deep.equal([
        "the settings agree with rollcall:deployment",
        "counts reconciled in 16 of 16 buckets",
        "  before: 2 rooms, 2 users, 3 connections, 0 typing",
        "  after:  1 rooms, 1 users, 1 connections, 0 typing",
      ]);
      const stats = await json<Stats>(["stats", "--json"]);
      expect(stats.total).to.include({ rooms: 1, users: 1, connections: 1, typing: 0 });
    });

    it("refuses settings the library would refuse (exit 2)", async () => {
      const { code, stderr } = await cli(["check", "--typing-window-ms", "60000"]);
      expect(code).to.equal(2);
      expect(stderr).to.equal("rollcall: typingWindowMs must be shorter than presenceWindowMs\n");
    });
  });

  describe("check of Redis's maxmemory-policy", () => {
    const own: Redis[] = [];
    /** A connection to a server of the test's own, emptied (a dump.rdb may have filled it). */
    const connect = async (url: string) => {
      const redis = new Redis(url);
      own.push(redis);
      await redis.flushall();
      return redis;
    };
    afterEach(async () => {
      own.splice(0).forEach((redis) => redis.disconnect());
      await stopRedisWith();
    });

    it("exits 1 when Redis may evict rollcall's keys, saying why, even where the settings agree", async () => {
      const { url } = await ownRedis();
      await (await connect(url)).config("SET", "maxmemory-policy", "allkeys-lru");
      const rc = new Rollcall(await connect(url), { ...IMMEDIATE, ...OPTIONS });
      rc.on("warning", () => undefined);
      await rc.ready();
      const { code, stdout } = await cli(["check", ...AGREEING], { REDIS_URL: url });
      expect(code).to.equal(1);
      const [agree, why, ...rest] = stdout.trimEnd().split("\n");
      expect(agree).to.equal("the settings agree with rollcall:deployment");
      expect(why).to.equal(
        `Redis evicts keys when it reaches maxmemory (maxmemory-policy allkeys-lru on ` +
          `127.0.0.1:${new URL(url).port}). rollcall's rooms and indexes all carry an expiry, so ` +
          `any evicting policy, volatile-* included, can drop present members without a leave, ` +
          `restart rooms' events and leave counts wrong. Set maxmemory-policy noeviction (then a ` +
          `full Redis refuses writes with REDIS_OOM instead of losing presence).`,
      );
      expect(rest).to.deep.equal([]);
    });

    it("reads the policy from INFO where CONFIG is disabled, and fails volatile-lru too", async () => {
      const url = await redisWith([
        ...["--rename-command", "CONFIG", ""],
        ...["--maxmemory-policy", "volatile-lru"],
      ]);
      await connect(url);
      const { code, stdout } = await cli(["check", ...AGREEING], { REDIS_URL: url });
      expect(code).to.equal(1);
      expect(stdout).to.match(/^nothing stored in rollcall:deployment yet/);
      expect(stdout).to.include(
        `(maxmemory-policy volatile-lru on 127.0.0.1:${new URL(url).port})`,
      );
      expect(stdout).to.include("Set maxmemory-policy noeviction");
    });
  });

  describe("watch", () => {
    it("tails the room's events with the roster after each, and ends cleanly on SIGINT", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      await rc.heartbeat("doc-42", "ann", "ann-1", { state: { status: "online" } });
      const { child, output, closed } = follow(["watch", "doc-42"]);
      try {
        await eventually(() => output.stdout.includes("1 present: ann\n"), 10_000);
        expect(output.stdout.split("\n").slice(0, 2)).to.deep.equal([
          `watching doc-42 on ${redisUrl()}`,
          `${" ".repeat(12)}  epoch ${(await rc.roster("doc-42")).epoch}, seq 1  1 present: ann`,
        ]);

        await rc.heartbeat("doc-42", "bob", "bob-1");
        await rc.startTyping("doc-42", "bob");
        await rc.setState("doc-42", "bob", { mood: "busy" });
        await rc.leave("doc-42", "bob", "bob-1");
        await eventually(() => output.stdout.split("\n").length >= 2 + 5 + 1);
        const time = String.raw`\d\d:\d\d:\d\d\.\d{3}`;
        const lines = output.stdout.trimEnd().split("\n").slice(2);
        const expected = [
          String.raw`join +bob  → 2 present: ann, bob`,
          String.raw`typing-start +bob  → 2 present: ann, bob; typing: bob`,
          String.raw`update +bob \{"mood":"busy"\}  → 2 present: ann, bob; typing: bob`,
          String.raw`typing-stop +bob left  → 2 present: ann, bob`,
          String.raw`leave +bob explicit  → 1 present: ann`,
        ];
        expect(lines).to.have.length(expected.length);
        lines.forEach((line, i) => expect(line).to.match(new RegExp(`^${time}  ${expected[i]}$`)));
      } finally {
        child.kill("SIGINT");
      }
      expect(await closed).to.equal(0);
      expect(output.stderr).to.equal("");
    });

    it("shows a resync and its reason when the replica catches up", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      await rc.heartbeat("doc-42", "ann", "ann-1");
      const { child, output, closed } = follow(["watch", "doc-42"]);
      const stdout = () => output.stdout;
      try {
        await eventually(() => stdout().includes("1 present: ann\n"), 10_000);
        // The subscriber connection is killed: the watch resubscribes, then takes a snapshot.
        const admin = client();
        const clients = String(await admin.client("LIST"));
        const subscriber = clients.split("\n").find((line) => / ssub=1 /.test(line));
        expect(subscriber, clients).to.be.a("string");
        await rc.heartbeat("doc-42", "bob", "bob-1");
        await admin.client("KILL", "ID", /\bid=(\d+)/.exec(subscriber!)![1]!);
        await rc.heartbeat("doc-42", "cy", "cy-1");
        await eventually(() => /resync \(reconnect\)/.test(stdout()), 10_000);
        expect(stdout()).to.match(/join +cy .*→ 3 present: ann, bob, cy/);
        expect(stdout()).to.match(
          /resync \(reconnect\) epoch \S+, seq \d+ {2}→ 3 present: ann, bob, cy/,
        );
      } finally {
        child.kill("SIGTERM");
      }
      expect(await closed).to.equal(0);
    });
  });

  describe("watch through an outage", () => {
    it("says each failure once while it retries, in its own words, then resyncs", async () => {
      const own = await ownRedis();
      const redis = new Redis(own.url, { maxRetriesPerRequest: 1 });
      redis.on("error", () => undefined);
      try {
        const rc = new Rollcall(redis, { ...IMMEDIATE, ...OPTIONS });
        await rc.heartbeat("doc-42", "ann", "ann-1");
        const { child, output, closed } = follow(["--redis", own.url, "watch", "doc-42"]);
        try {
          await eventually(() => output.stdout.includes("1 present: ann\n"), 10_000);
          await own.server.stop();
          await eventually(() => output.stderr.includes("(retrying)"), 10_000, "a retry said");
          await own.server.start();
          await eventually(() => output.stdout.includes("resync (reconnect)"), 20_000, "resync");
        } finally {
          child.kill("SIGINT");
        }
        expect(await closed).to.equal(0);
        const lines = output.stderr.trimEnd().split("\n");
        for (const line of lines) expect(line).to.match(/^rollcall: (?!rollcall)\S/);
        lines.slice(1).forEach((line, i) => expect(line, output.stderr).to.not.equal(lines[i]));
        expect(lines[0]).to.match(/^rollcall: subscriber connection failed: .+ \(retrying\)$/);
      } finally {
        redis.disconnect();
      }
    });
  });

  describe("settings", () => {
    it("shows the stored settings, and whether the deployment is in use, as a table or JSON", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, prefix: "shown" });
      await rc.heartbeat("doc-42", "ann", "c1");
      const { code, stdout, stderr } = await cli(["--prefix", "shown", "settings"]);
      expect(code, stderr).to.equal(0);
      expect(stdout.split("\n").map((line) => line.replace(/ +/g, " "))).to.deep.equal([
        "shown:deployment",
        " layout 3",
        " buckets 16",
        " presenceWindowMs 60000",
        " typingWindowMs 30000",
        " keyTtlMs 600000",
        " leaveGraceMs 0",
        " logLength 0",
        "in use: 1 room, 1 user, 1 connection, 0 due",
        "",
      ]);
      const shown = await json<{ settings: Record<string, number>; inUse: boolean }>([
        "--prefix",
        "shown",
        "settings",
        "--json",
      ]);
      expect(shown).to.deep.include({ key: "shown:deployment", inUse: true });
      expect(shown.settings).to.include({ layout: 3, presenceWindowMs: 60_000, logLength: 0 });
    });

    it("deletes them once nothing is present, refusing while anything is, and touches no room", async () => {
      const rc = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS, prefix: "gone" });
      const other = new Rollcall(client(), { ...IMMEDIATE, ...OPTIONS });
      await rc.heartbeat("doc-42", "ann", "c1");
      await other.heartbeat("doc-42", "bob", "c1");

      const refused = await cli(["--prefix", "gone", "settings", "--delete"]);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.match(
        /^rollcall: gone:deployment is not deleted: in use: 1 room, 1 user, 1 connection, 0 due\. Instances run on these settings, or stopped less than a presence window and leave grace ago: .*`rollcall sweep`/,
      );
      expect(await client().exists("gone:deployment")).to.equal(1);

      await rc.leave("doc-42", "ann", "c1");
      const deleted = await cli(["--prefix", "gone", "settings", "--delete"]);
      expect(deleted.code, deleted.stderr).to.equal(0);
      expect(deleted.stdout).to.equal(
        "deleted gone:deployment: the next instance to start stores its own settings\n",
      );
      expect(await client().exists("gone:deployment")).to.equal(0);
      expect((await cli(["--prefix", "gone", "settings"])).code).to.equal(2);
      // Another prefix's deployment and rooms are untouched.
      expect((await other.roster("doc-42")).count).to.equal(1);
      // The next instance stores other settings, and runs.
      const next = new Rollcall(client(), { prefix: "gone", logLength: 100 });
      await next.heartbeat("doc-42", "ann", "c1");
      expect((await next.roster("doc-42")).count).to.equal(1);
    });

    it("refuses to delete what another layout stored, which it cannot count", async () => {
      await client().hset("old:deployment", { layout: "2", buckets: "16" });
      const shown = await cli(["--prefix", "old", "settings"]);
      expect(shown.code, shown.stderr).to.equal(0);
      expect(shown.stdout).to.match(
        /stored by a release of layout 2 \(this one is 3\): whether it is in use is that release's to tell\n$/,
      );
      const refused = await cli(["--prefix", "old", "settings", "--delete"]);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.match(
        /^rollcall: old:deployment is not deleted: it was stored by a release of layout 2/,
      );
      expect(await client().exists("old:deployment")).to.equal(1);
    });
  });

  describe("errors", () => {
    it("a usage error exits 2 with its message and a pointer to --help", async function () {
      // Eight runs of the CLI, one after another, each killed after 20 s: however long a loaded
      // machine takes to start them, the runs bound the test, not mocha's default 30 s.
      this.timeout(8 * 20_000);
      for (const args of [
        ["launch"],
        ["stats", "--nope"],
        ["sweep", "--json"],
        ["roster"],
        [],
        ["--redis", "redis://x", "--cluster", "x:1", "stats"],
      ]) {
        const { code, stdout, stderr } = await cli(args);
        expect(code, args.join(" ")).to.equal(2);
        expect(stdout).to.equal("");
        expect(stderr).to.match(/^rollcall: [^\n]+\nRun rollcall --help for the usage\.\n$/);
      }
      const unknown = await cli(["stats", "--nope"]);
      expect(unknown.stderr).to.match(/^rollcall: Unknown option '--nope'\n/);
      const help = await cli(["--help"]);
      expect(help.code).to.equal(0);
      expect(help.stdout).to.match(/^Usage: rollcall /);
    });

    it("names a URL that is not a Redis URL, from --redis or REDIS_URL", async () => {
      const flag = await cli(["--redis", "http://127.0.0.1:6379", "stats"]);
      expect(flag.code).to.equal(2);
      expect(flag.stderr).to.equal(
        'rollcall: --redis takes a redis:// or rediss:// URL, got "http://127.0.0.1:6379"\n',
      );
      const env = await cli(["stats"], { REDIS_URL: "localhost:6379" });
      expect(env.code).to.equal(2);
      expect(env.stderr).to.equal(
        'rollcall: REDIS_URL takes a redis:// or rediss:// URL, got "localhost:6379"\n',
      );
    });

    it("an unreachable Redis exits 1 after its few attempts, in one line", async () => {
      const port = await freePort();
      const { code, stdout, stderr } = await cli(["stats"], {
        REDIS_URL: `redis://127.0.0.1:${port}`,
      });
      expect(code).to.equal(1);
      expect(stdout).to.equal("");
      expect(stderr).to.equal(
        `rollcall: cannot reach redis://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
      );
      // Refused, not "timed out": the attempts ran out, not the 20 s the CLI waits at most.
    });
  });
});

describe("the rollcall CLI on a Redis Cluster", () => {
  const { connect, cluster } = useCluster(3);

  it("check reads every master's maxmemory-policy, and exits 1 naming the one that may evict", async function () {
    this.timeout(60_000);
    const [, , evicting] = await cluster().masters();
    const admin = cluster().admin(evicting!.port);
    await admin.config("SET", "maxmemory-policy", "allkeys-lru");
    try {
      const nodes = cluster()
        .nodes.map((n) => `${n.host}:${n.port}`)
        .join(",");
      const { code, stdout } = await cli(["--cluster", nodes, "check"]);
      expect(code).to.equal(1);
      expect(stdout).to.include(`(maxmemory-policy allkeys-lru on 127.0.0.1:${evicting!.port}).`);
      expect(stdout.match(/ on 127\.0\.0\.1:/g)).to.have.length(1);
    } finally {
      await admin.config("SET", "maxmemory-policy", "noeviction");
    }
  });

  it("prints a roster and stats across shards", async function () {
    this.timeout(60_000);
    const redis = connect();
    // Only the typing mark expires during the test: a backlog of exactly one room.
    const rc = new Rollcall(redis, {
      ...IMMEDIATE,
      userStatus: true,
      presenceWindowMs: 30_000,
      typingWindowMs: 300,
      keyTtlMs: 90_000,
    });
    const rooms = Array.from({ length: 12 }, (_, i) => `room${i}`);
    for (const room of rooms) {
      await rc.heartbeat(room, "ann", "c1");
      await rc.heartbeat(room, "ann", "c2");
      await rc.heartbeat(room, "bob", "c1");
    }
    // 400 ms ago, as the CLI sees it: the mark is past its window.
    await advanceClock(redis, rc, -400);
    await rc.startTyping("room3", "bob");
    const nodes = [
      "--cluster",
      cluster()
        .nodes.map((n) => `${n.host}:${n.port}`)
        .join(","),
    ];

    const { code, stdout, stderr } = await cli([...nodes, "roster", "room3"]);
    expect(code, stderr).to.equal(0);
    expect(stdout).to.match(/^room3: 2 present, 1 typing \(epoch \S+, seq \d+\)\n/);
    expect(stdout).to.match(/^bob +1 +\S+ ago +\S+ ago +yes/m);

    const stats = await json<Stats>([...nodes, "stats", "--json"]);
    expect(stats.total).to.deep.equal({
      rooms: 12,
      users: 24,
      connections: 36,
      typing: 1,
      backlog: 1, // room3: bob's typing mark
      lagMs: stats.total.lagMs,
    });
    expect(stats.total.lagMs).to.be.within(100, 30_000);
    const events = await Promise.all(
      stats.buckets.map((b) => redis.hget(rc.layout.seq(b.bucket), "n")),
    );
    expect(stats.buckets.map((b) => b.events)).to.deep.equal(events.map((n) => Number(n ?? 0)));

    await Promise.all(rooms.map((room) => rc.applyUserChanges(rc.bucketOf(room))));
    const status = await cli([...nodes, "status", "ann", "bob", "cy"]);
    expect(status.code, status.stderr).to.equal(0);
    expect(status.stdout).to.match(
      /^user +online +since +last seen\nann +yes +\S+ +-\nbob +yes +\S+ +-\ncy +no +- +never\n$/,
    );
  });
});
