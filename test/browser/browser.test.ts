// The demo page in headless Chromium (Debian's chromium, driven by playwright-core), one page per
// gateway instance, each instance a process of its own (src/dev/gatewayServer.ts) on the test's
// Redis. The page loads the browser client as tsc emits it: dist/ is built first.
import { expect } from "chai";
import { existsSync, statSync } from "node:fs";
import { copyFile, mkdir } from "node:fs/promises";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import {
  engineOptions,
  spawnGateway,
  type GatewayProcess,
  type Windows,
} from "../../src/dev/instances.js";
import { Rollcall } from "../../src/engine/rollcall.js";
import type { ReplicaRoster } from "../../src/protocol/replica.js";
import { buildDist, expectBuilt, ROOT } from "../kit/build.js";
import { client, listen, redisUrl } from "../kit/redis.js";
import { asReplica } from "../kit/rosters.js";
import { eventually } from "../kit/wait.js";

const WINDOWS: Windows = {
  presenceWindowMs: 3_000,
  typingWindowMs: 2_000,
  heartbeatMs: 1_000,
  sweepMs: 250,
  pingMs: 1_000,
  // No grace: a leave is checked against the window and the sweep interval alone.
  leaveGraceMs: 0,
};
const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = `${ROOT}test/browser/screenshots/demo.png`;

/** What a page's replica holds, read from the page (the demo exposes its client and room). */
async function replica(page: Page): Promise<ReplicaRoster> {
  return page.evaluate<ReplicaRoster>("window.rollcallDemo.room.roster");
}

/** The same, from Redis: what the replica must converge to. */
async function truth(rollcall: Rollcall, room: string): Promise<ReplicaRoster> {
  return asReplica(await rollcall.roster(room));
}

describe("the demo page in a real browser, on two gateway processes", function () {
  const gateways: GatewayProcess[] = [];
  const contexts = new Set<BrowserContext>();
  const pageErrors: string[] = [];
  let browser: Browser;

  /** Starts instance i, or restarts it on its port after a kill. */
  async function startGateway(i: number): Promise<GatewayProcess> {
    const port = gateways[i]?.port ?? 0;
    gateways[i] = await spawnGateway({ redisUrl: redisUrl(), port, windows: WINDOWS });
    return gateways[i];
  }

  /** A page of its own browser context (as a separate tab or person), joined to a room. */
  async function open(
    gateway: GatewayProcess,
    user: string,
    room: string,
    viewport = { width: 1000, height: 700 },
  ): Promise<Page> {
    const context = await browser.newContext({ viewport });
    contexts.add(context);
    const page = await context.newPage();
    page.on("pageerror", (error) => pageErrors.push(`${user}: ${error.message}`));
    await page.goto(`${gateway.url}?user=${user}&room=${room}`);
    await page.waitForFunction("window.rollcallDemo?.room != null", undefined, { timeout: 5_000 });
    return page;
  }

  /** Waits for a condition in the page, polled every 20 ms; returns the time it took. */
  async function until(page: Page, condition: string, timeout = 5_000): Promise<number> {
    const start = performance.now();
    await page.waitForFunction(condition, undefined, { polling: 20, timeout });
    return Math.round(performance.now() - start);
  }

  const member = (user: string) => `document.querySelector('#roster li[data-user="${user}"]')`;
  const shows = (user: string) => `${member(user)} !== null`;
  const logged = (text: string) =>
    `document.getElementById("log").textContent.includes(${JSON.stringify(text)})`;
  const typingLine = `document.getElementById("typing").textContent`;

  before(async function () {
    this.timeout(120_000);
    await buildDist();
    expectBuilt("client", "protocol");
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);
    // The instances outlive each test: they start on an empty Redis, whatever ran before them.
    const admin = client();
    await admin.flushall();
    admin.disconnect();
    const started = await Promise.allSettled([startGateway(0), startGateway(1)]);
    const failed = started.find((s) => s.status === "rejected");
    if (failed) throw failed.reason;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  });

  beforeEach(async function () {
    this.timeout(30_000);
    // A test that killed an instance leaves it to be started again, on its port.
    for (const i of [0, 1]) {
      const child = gateways[i]!.child;
      if (child.exitCode !== null || child.signalCode !== null) await startGateway(i);
    }
  });

  afterEach(async () => {
    await Promise.all([...contexts].map((c) => c.close()));
    contexts.clear();
    const errors = pageErrors.splice(0);
    expect(errors, "uncaught errors in the pages").to.deep.equal([]);
  });

  after(async function () {
    this.timeout(30_000);
    await browser?.close();
    await Promise.all(gateways.map((g) => g?.stop()));
  });

  it("shows a join across instances, and a person with two tabs once", async () => {
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "join");
    const bob = await open(west!, "bob", "join");
    await until(ann, shows("bob"));
    await until(ann, logged("+ bob joined"));
    await until(bob, shows("ann"));
    // ann's second tab, on the other instance: one member still, and no join announced again.
    await open(west!, "ann", "join");
    await until(bob, `document.getElementById("count").textContent === "2"`);
    expect(await bob.locator("#roster li").count()).to.equal(2);
    expect(await bob.locator("#log li", { hasText: "+ ann joined" }).count()).to.equal(0);
  });

  it("shows typing on the other page, stopped by sending and by leaving the input", async () => {
    const [east, west] = gateways;
    const rollcall = new Rollcall(client(), engineOptions(WINDOWS));
    const events = await listen([rollcall.channel("typing")]);
    const stops = () => events.filter((e) => e.type === "typing-stop" && e.user === "bob");
    const ann = await open(east!, "ann", "typing");
    const bob = await open(west!, "bob", "typing");
    await until(ann, shows("bob"));
    await bob.locator("#message").pressSequentially("hello an", { delay: 30 });
    await until(ann, `${typingLine} === "bob is typing…"`);
    await bob.locator("#message").press("Enter");
    await until(ann, `${typingLine} === ""`);
    // Stopped by bob's typing-stop, not by the typing window.
    await eventually(() => stops().length === 1);
    expect(stops()[0]).to.include({ reason: "explicit" });
    await bob.locator("#message").pressSequentially("one more", { delay: 30 });
    await until(ann, `${typingLine} === "bob is typing…"`);
    await bob.locator("#state").focus();
    await until(ann, `${typingLine} === ""`);
    await eventually(() => stops().length === 2);
    expect(stops()[1]).to.include({ reason: "explicit" });
  });

  it("shows a state update", async () => {
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "state");
    const bob = await open(west!, "bob", "state");
    await until(ann, shows("bob"));
    await bob.locator("#state").selectOption("busy");
    await until(ann, `${member("bob")}.querySelector(".state").textContent === "busy"`);
    await until(ann, logged("~ bob is now busy"));
    expect(await ann.locator('#roster li[data-user="bob"]').getAttribute("class")).to.equal("busy");
  });

  it("announces a closed page on the other one", async () => {
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "close");
    const bob = await open(west!, "bob", "close");
    await until(ann, shows("bob"));
    await bob.close();
    // A clean leave, not the presence window's expiry ("timed out").
    await until(ann, `!(${shows("bob")})`);
    await until(ann, logged("- bob left"));
    expect(await ann.locator("#log").textContent()).not.to.include("timed out");
  });

  it("announces the users of a SIGKILLed gateway through the other one's Sweeper", async function () {
    this.timeout(20_000);
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "kill");
    await open(west!, "bob", "kill");
    await until(ann, shows("bob"));
    const killed = performance.now();
    west!.child.kill("SIGKILL");
    const bound = WINDOWS.presenceWindowMs + WINDOWS.sweepMs;
    await until(ann, `!(${shows("bob")})`, bound + 10_000);
    const elapsed = Math.round(performance.now() - killed);
    console.log(`      leave after SIGKILL: ${elapsed} ms (window + sweep interval: ${bound} ms)`);
    // Expired, not left: never before the window since bob's last heartbeat (a busy machine
    // only adds to the wait, which the bound above allows for).
    expect(elapsed).to.be.at.least(WINDOWS.presenceWindowMs - WINDOWS.heartbeatMs);
    await until(ann, logged("- bob left, timed out"));
  });

  it("reconnects after its gateway dies and comes back, its replica converging", async function () {
    this.timeout(20_000);
    const [east, west] = gateways;
    const rollcall = new Rollcall(client(), engineOptions(WINDOWS));
    const ann = await open(east!, "ann", "reconnect");
    const bob = await open(west!, "bob", "reconnect");
    await until(ann, shows("bob"));
    const killed = performance.now();
    west!.child.kill("SIGKILL");
    await west!.exited;
    await until(bob, `document.getElementById("status").textContent === "reconnecting"`);
    // The last roster stays in view, shown as stale, until the rejoin's snapshot.
    const stale = `document.getElementById("present").classList.contains("stale")`;
    await until(bob, stale);
    expect(await bob.locator("#stale").textContent()).to.match(
      /^Reconnecting: as of .+, this may be out of date\.$/,
    );
    expect(await bob.locator("#roster li").count()).to.equal(2);
    // Missed by bob while he is away: only the snapshot of his rejoin can tell him.
    await ann.locator("#state").selectOption("away");
    await startGateway(1);
    const restarted = performance.now();
    await until(bob, `document.getElementById("status").textContent === "open"`, 10_000);
    const converged = async () => {
      expect(await replica(bob)).to.deep.equal(await truth(rollcall, "reconnect"));
      return true;
    };
    await eventually(converged, 10_000, "bob's replica to converge");
    await until(bob, `!${stale}`);
    expect(await bob.locator("#stale").isHidden()).to.equal(true);
    const done = performance.now();
    console.log(
      `      replica converged ${Math.round(done - restarted)} ms after the restart, ` +
        `${Math.round(done - killed)} ms after the kill`,
    );
    expect(await replica(bob)).to.deep.equal(await truth(rollcall, "reconnect"));
    const annAsBobSees = (await replica(bob)).members.find((m) => m.user === "ann");
    expect(annAsBobSees?.state).to.deep.equal({ status: "away" });
    expect(await replica(ann)).to.deep.equal(await truth(rollcall, "reconnect"));
  });

  it("keeps a member's chosen state across a reload, with no update announced", async () => {
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "reload");
    const bob = await open(west!, "bob", "reload");
    await until(bob, shows("ann"));
    await ann.locator("#state").selectOption("busy");
    await until(bob, logged("~ ann is now busy"));
    await ann.reload();
    await ann.waitForFunction("window.rollcallDemo?.room != null", undefined, { timeout: 5_000 });
    expect(await ann.locator("#state").inputValue()).to.equal("busy");
    await until(ann, `${member("ann")}?.querySelector(".state").textContent === "busy"`);
    // Bob's page saw one update, the choice: none from the reload's rejoin.
    const rollcall = new Rollcall(client(), engineOptions(WINDOWS));
    await until(
      bob,
      `window.rollcallDemo.room.roster.seq === ${(await rollcall.roster("reload")).seq}`,
    );
    expect(await bob.locator("#log li", { hasText: "~ ann is now" }).count()).to.equal(1);
  });

  it("follows users from a page: one goes online on another instance, then offline", async () => {
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "contacts");
    await ann.evaluate(`window.rollcallDemo.client.followUsers(["dora", "eli"]).then((list) => {
      window.contacts = list;
      window.contactChanges = [];
      list.on("change", (s) => window.contactChanges.push((s.online ? "online:" : "offline:") + s.user));
    })`);
    const doraOnline = (online: boolean) => `window.contacts?.status("dora")?.online === ${online}`;
    await until(ann, doraOnline(false));
    expect(await ann.evaluate("window.contacts.statuses.map((s) => s.user)")).to.deep.equal([
      "dora",
      "eli",
    ]);
    const dora = await open(west!, "dora", "elsewhere");
    await until(ann, doraOnline(true));
    await dora.close();
    await until(ann, doraOnline(false));
    expect(await ann.evaluate("window.contactChanges")).to.deep.equal([
      "online:dora",
      "offline:dora",
    ]);
    const lastSeen = await ann.evaluate<number | null>('window.contacts.status("dora").lastSeenAt');
    expect(lastSeen).to.be.a("number");
  });

  it("fits a 380 px wide screen: no sideways scrolling, the roster and the input in view", async () => {
    const [east] = gateways;
    const page = await open(east!, "ann", "narrow", { width: 380, height: 700 });
    await until(page, shows("ann"));
    const overflow = await page.evaluate<number>(
      "document.documentElement.scrollWidth - document.documentElement.clientWidth",
    );
    expect(overflow).to.equal(0);
    for (const selector of ["#roster", "#message", "#state"]) {
      const box = await page.locator(selector).boundingBox();
      expect(box!.x).to.be.at.least(0);
      expect(box!.x + box!.width).to.be.at.most(380);
    }
  });

  it("saves a screenshot of the demo page: two members, one typing", async () => {
    const [east, west] = gateways;
    const ann = await open(east!, "ann", "lobby");
    const bob = await open(west!, "bob", "lobby");
    await until(ann, shows("bob"));
    await ann.locator("#state").selectOption("away");
    await until(bob, logged("~ ann is now away"));
    await ann.locator("#message").pressSequentially("see you at 3", { delay: 20 });
    await until(bob, `${typingLine} === "ann is typing…"`);
    await mkdir(`${ROOT}test/browser/screenshots`, { recursive: true });
    await bob.screenshot({ path: SCREENSHOT });
    expect(statSync(SCREENSHOT).size).to.be.above(10_000);
    // The README's copy is committed: refreshed on request only.
    if (process.env.UPDATE_DOCS_SCREENSHOT === "1") {
      await mkdir(`${ROOT}docs`, { recursive: true });
      await copyFile(SCREENSHOT, `${ROOT}docs/demo.png`);
    }
  });
});
