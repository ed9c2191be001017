// socket.io-client in a page of headless Chromium, fed to rollcall/socket.io/client's replicas as
// tsc emits them (dist/ is built first), against two Socket.IO instances with the Redis adapter.
import { expect } from "chai";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { chromium, type Browser, type Page } from "playwright-core";
import type { ReplicaRoster } from "../../src/protocol/replica.js";
import { buildDist, expectBuilt, ROOT } from "../kit/build.js";
import { redisUrl } from "../kit/redis.js";
import { asReplica } from "../kit/rosters.js";
import { connectIo, heard, startIo, type IoClient, type IoInstance } from "../kit/socketio.js";
import { eventually } from "../kit/wait.js";

const CHROMIUM = "/usr/bin/chromium";

/** The page: a user's socket in a room, its rosters as window.presence. */
const PAGE = `<!doctype html>
<script type="module">
  import { io } from "/socket.io/socket.io.esm.min.js";
  import { SocketPresence } from "/client/socketio.js";
  const params = new URLSearchParams(location.search);
  const socket = io({ auth: { user: params.get("user") }, transports: ["websocket"] });
  window.presence = new SocketPresence(socket);
  socket.emit("join", params.get("room"));
</script>`;

/** An instance whose http.Server also serves the page and dist/client, dist/protocol. */
async function pageServer(): Promise<IoInstance> {
  const http = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    if (path === "/") {
      response.writeHead(200, { "Content-Type": "text/html" }).end(PAGE);
      return;
    }
    const served = /^\/(client|protocol)\/[a-z]+\.js$/i.test(path);
    readFile(`${ROOT}dist${path}`).then(
      (body) => {
        if (!served) throw new Error("not served");
        response.writeHead(200, { "Content-Type": "text/javascript" }).end(body);
      },
      () => response.writeHead(404).end(),
    );
  });
  return startIo({ redisUrl: redisUrl(), adapter: true }, 0, http);
}

describe("rollcall/socket.io/client in a real browser", function () {
  let browser: Browser;
  const instances: IoInstance[] = [];
  const clients: IoClient[] = [];
  const pageErrors: string[] = [];

  before(async function () {
    this.timeout(120_000);
    await buildDist();
    expectBuilt("client", "protocol");
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
    });
  });

  after(async () => {
    await browser?.close();
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.socket.disconnect();
    await Promise.all(instances.splice(0).map((i) => i.close()));
    expect(pageErrors.splice(0), "uncaught errors in the page").to.deep.equal([]);
  });

  const roster = (page: Page, room: string) =>
    page.evaluate<ReplicaRoster | undefined>(`window.presence.roster(${JSON.stringify(room)})`);

  it("keeps a page's roster live across instances: joins, typing, state, leaves", async function () {
    this.timeout(60_000);
    const a = await pageServer();
    const b = await startIo({ redisUrl: redisUrl(), adapter: true });
    instances.push(a, b);
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on("pageerror", (error) => pageErrors.push(error.message));
    await page.goto(`${a.url}/?user=ann&room=doc`);
    await page.waitForFunction("window.presence?.roster('doc')?.count === 1", undefined, {
      timeout: 10_000,
    });

    const bob = connectIo(b.url, "bob");
    clients.push(bob);
    await bob.join("doc");
    await bob.call("rollcall:typing", "doc");
    await bob.call("rollcall:state", "doc", { status: "away" });
    await page.waitForFunction(
      "(r => r?.typing.includes('bob') && r.members.some(m => m.state?.status === 'away'))(window.presence.roster('doc'))",
    );
    // The page types: bob, on the other instance, hears it.
    await page.evaluate("window.presence.typing('doc')");
    await eventually(() => heard(bob, "doc").includes("typing-start:ann"));
    await page.evaluate("window.presence.setState('doc', { status: 'here' })");
    await eventually(() => heard(bob, "doc").includes("update:ann"));
    await bob.leave("doc");
    await page.waitForFunction("window.presence.roster('doc').count === 1");
    expect(await roster(page, "doc")).to.deep.equal(asReplica(await a.rollcall.roster("doc")));
    await context.close();
  });
});
