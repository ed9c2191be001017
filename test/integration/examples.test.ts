// Every fenced code block of README.md and docs/*.md that has a language, run as a reader would
// run it, against the test's Redis (REDIS_URL; servers get PORT and HOST): `ts` with tsx, the
// package's entries mapped to src/; `js`, the pages, in Chromium against the server they name;
// `sh`, install lines checked against the versions the tests run and CLI lines run with the
// built CLI; `json`, the event example, checked against the schema. A doc's blocks must be
// the ones listed here, in order: a new example comes with its run. Blocks without a language
// are not code (a sketch of frames).
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { Rollcall } from "../../src/engine/rollcall.js";
import { bearerToken, Gateway } from "../../src/gateway/index.js";
import { checkEvent } from "../../src/protocol/events.js";
import { buildDist, expectBuilt, ROOT } from "../kit/build.js";
import { provider } from "../kit/hocuspocus.js";
import { freePort } from "../kit/ports.js";
import { client, redisUrl } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

const CHROMIUM = "/usr/bin/chromium";
const MANIFEST = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  version: string;
  exports: Record<string, string | { default: string }>;
  peerDependencies: Record<string, string>;
};

/** One test: it runs the doc's next blocks, of these languages, together. */
interface Check {
  title: string;
  blocks: string[];
  run(sources: string[]): Promise<void>;
}

/** A TypeScript example that runs to its end and prints `expected` (or a line matching it). */
const prints = (title: string, expected: string | RegExp): Check => ({
  title,
  blocks: ["ts"],
  run: async ([source]) => {
    const { code, stdout, stderr } = await runToEnd(source!);
    expect(code, stderr).to.equal(0);
    if (typeof expected === "string") expect(stdout.trim()).to.equal(expected);
    else expect(stdout.trim()).to.match(expected);
    expect(stderr).to.equal("");
    await expectOwnPrefix();
  },
});

/** An install block: each line installs pinned versions (checked with every other line). */
const installs = (title: string): Check => ({
  title,
  blocks: ["sh"],
  run: ([source]) => {
    const lines = source!.trimEnd().split("\n");
    for (const line of lines) expect(line).to.match(/^npm install /);
    expect(installLines(source!)).to.have.length(lines.length);
    return Promise.resolve();
  },
});

const DOCS: [string, Check[]][] = [
  [
    "README.md",
    [
      {
        title: "the set-up block's demo, scripted (make test is what CI runs)",
        blocks: ["sh"],
        run: async ([source]) => {
          expect(source).to.match(/^make demo {3}#/m);
          const { code, stdout } = await runScript(["src/dev/demo.ts", "--scripted"], {
            // The shortest windows the demo's scenario allows: its swept bob goes within 2 s.
            DEMO_PRESENCE_MS: "1000",
            DEMO_TYPING_MS: "500",
            DEMO_HEARTBEAT_MS: "300",
            DEMO_SWEEP_MS: "100",
            DEMO_PING_MS: "300",
            DEMO_GRACE_MS: "200",
          });
          expect(code, stdout).to.equal(0);
          expect(stdout).to.match(/scripted demo OK: 7 events, as expected\n$/);
        },
      },
      prints("the engine", "1 { status: 'online' }"),
      prints("the subscriber and a watch", "event: join bob\nchange: join bob 1"),
      prints("the event log", "logged: join cy"),
      prints("the gateway", "gateway on a port: true sockets: 0"),
      { title: "the browser client, in a page", blocks: ["js"], run: readmePage },
    ],
  ],
  ["docs/internet.md", [prints("a gateway with its own sessions", "listening: true")]],
  [
    "docs/integrations.md",
    [
      installs("the Socket.IO install line"),
      {
        title: "the Socket.IO server, and its page in Chromium",
        blocks: ["ts", "js"],
        run: socketIo,
      },
      installs("the Hocuspocus install lines"),
      { title: "the Hocuspocus server, with a provider", blocks: ["ts"], run: hocuspocus },
      installs("the Fastify install lines"),
      prints("the Fastify route", /^presence at ws:\/\/127\.0\.0\.1:\d+\/presence$/),
    ],
  ],
  [
    "docs/operations.md",
    [
      {
        title: "rollcall check, storing nothing",
        blocks: ["sh"],
        run: async ([source]) => {
          const [result] = await shell(source!);
          expect(result).to.deep.include({ code: 0 });
          expect(result!.stdout).to.match(/^nothing stored in rollcall:deployment yet/);
          expect(await client().keys("*")).to.deep.equal([]);
        },
      },
      {
        title: "rollcall settings, and --delete refused while in use",
        blocks: ["sh"],
        run: async ([source]) => {
          const prefix = /--prefix (\S+)/.exec(source!)![1]!;
          await new Rollcall(client(), { prefix }).heartbeat("doc-1", "ann", "tab-1");
          const [shown, deleted] = await shell(source!);
          expect(shown).to.deep.include({ code: 0 });
          expect(shown!.stdout).to.match(/^in use: 1 room, 1 user, 1 connection, 0 due$/m);
          expect(deleted).to.deep.include({ code: 1 });
          expect(await client().exists(`${prefix}:deployment`)).to.equal(1);
        },
      },
    ],
  ],
  [
    "docs/protocol.md",
    [
      {
        title: "the event example, against the schema",
        blocks: ["json"],
        run: ([source]) => {
          const event = JSON.parse(source!) as unknown;
          expect(checkEvent(event)).to.deep.equal(event);
          return Promise.resolve();
        },
      },
    ],
  ],
];

/** The fenced blocks of a doc that have a language. */
function blocksOf(doc: string): { lang: string; source: string }[] {
  const text = readFileSync(join(ROOT, doc), "utf8");
  return [...text.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1]!,
    source: m[2]!,
  }));
}

/** The docs with code: every one of them is listed above. */
const documented = () =>
  ["README.md", ...readdirSync(join(ROOT, "docs")).map((f) => `docs/${f}`)].filter(
    (doc) => doc.endsWith(".md") && blocksOf(doc).length > 0,
  );

/** Each `npm install …` of a text, in a block or inline, as its package specs. */
function installLines(text: string): string[][] {
  return [...text.matchAll(/npm install ((?:[@\w./-]+@?[\w.^~-]* ?)+)/g)].map((m) =>
    m[1]!.trim().split(/ +/),
  );
}

describe("the examples of README.md and docs/*.md", function () {
  this.timeout(60_000);

  before(async function () {
    this.timeout(120_000);
    await buildDist();
    expectBuilt("cli", "client", "protocol");
  });

  after(async () => {
    await (await launched)?.close();
  });

  it("lists every doc that has code blocks", () => {
    expect(documented().sort()).to.deep.equal(DOCS.map(([doc]) => doc).sort());
  });

  it("installs pinned versions in every npm install line, those the tests run, every peer's", () => {
    const installed = new Set<string>();
    for (const doc of documented()) {
      for (const line of installLines(readFileSync(join(ROOT, doc), "utf8"))) {
        for (const spec of line) {
          const at = spec.lastIndexOf("@");
          expect(at, `${doc}: ${spec} names no version`).to.be.above(0);
          const [name, range] = [spec.slice(0, at), spec.slice(at + 1)];
          expect(range, `${doc}: ${spec}`).to.match(/^\d+(\.\d+)?$/);
          const version = name === "rollcall" ? MANIFEST.version : installedVersion(name);
          expect(`${version}.`, `${doc}: ${spec} is not what the tests run`).to.satisfy(
            (v: string) => v.startsWith(`${range}.`),
          );
          installed.add(name);
        }
      }
    }
    // @opentelemetry/api: its types only, for the Meter the application already made.
    const peers = Object.keys(MANIFEST.peerDependencies).filter((p) => p !== "@opentelemetry/api");
    expect([...installed]).to.include.members(["rollcall", ...peers]);
  });

  it("compiles every TypeScript example against the package's declarations, strict", async () => {
    const files = documented().flatMap((doc) =>
      blocksOf(doc)
        .filter((b) => b.lang === "ts")
        .map((b) => exampleFile(b.source, true)),
    );
    // The options on the command line, no tsconfig written: with files given, tsc reads none.
    const options = [
      ...["--target", "ES2022", "--module", "NodeNext", "--moduleResolution", "NodeNext"],
      ...["--strict", "--noEmit", "--types", "node"],
      "--skipLibCheck", // the libraries' own declarations are test/package's business
    ];
    try {
      const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
      const { code, stdout } = await runNode([tsc, ...options, ...files]);
      expect(code, stdout).to.equal(0);
    } finally {
      for (const file of files) rmSync(file);
    }
  });

  for (const [doc, checks] of DOCS) {
    describe(doc, () => {
      it("has the blocks this test knows", () => {
        const langs = blocksOf(doc).map((b) => b.lang);
        expect(langs).to.deep.equal(checks.flatMap((c) => c.blocks));
      });

      let next = 0;
      for (const check of checks) {
        const from = next;
        next += check.blocks.length;
        const which =
          check.blocks.length === 1 ? `block ${from + 1}` : `blocks ${from + 1}–${next}`;
        it(`runs ${which} as written: ${check.title}`, async () => {
          const blocks = blocksOf(doc).slice(from, from + check.blocks.length);
          await check.run(blocks.map((b) => b.source));
        });
      }
    });
  }
});

function installedVersion(name: string): string {
  const manifest = join(ROOT, "node_modules", name, "package.json");
  return (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;
}

/** The package's entries, as the examples name them, mapped to their sources. */
function withSources(source: string, built = false): string {
  return source.replace(/from "rollcall(\/[^"]*)?"/g, (_, sub: string | undefined) => {
    const target = MANIFEST.exports[`.${sub ?? ""}`]!;
    const path = (typeof target === "string" ? target : target.default).slice(2);
    return `from "../../${built ? path : path.replace(/^dist\//, "src/")}"`;
  });
}

let written = 0;
/**
 * An example as a file of this directory (where the sources and node_modules resolve), its
 * entries mapped to src/, or with `built` to dist/ and its type declarations.
 */
function exampleFile(source: string, built = false): string {
  const file = join(ROOT, "test", "integration", `example-${process.pid}-${written++}.tmp.ts`);
  writeFileSync(file, withSources(source, built));
  return file;
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A Node process on tsx, its output collected; killed after 30 s, which fails its test. */
function spawnTsx(args: string[], env: Record<string, string> = {}) {
  return spawnNode(["--import", "tsx", ...args], env);
}

function runNode(args: string[]): Promise<Ran> {
  return spawnNode(args).ended;
}

function spawnNode(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: redisUrl(), NO_COLOR: "1", ...env },
    timeout: 30_000,
    killSignal: "SIGKILL",
  });
  const output = { stdout: "", stderr: "" };
  child.stdout.on("data", (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output.stderr += chunk.toString()));
  const ended = new Promise<Ran>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, ...output }));
  });
  return { child, output, ended };
}

async function runScript(args: string[], env?: Record<string, string>): Promise<Ran> {
  return spawnTsx(args, env).ended;
}

async function runToEnd(source: string): Promise<Ran> {
  const file = exampleFile(source);
  try {
    return await runScript([file]);
  } finally {
    rmSync(file);
  }
}

/** A server example, running until stop(): SIGTERM, then its exit code. */
async function startServer(source: string, ready: RegExp) {
  const file = exampleFile(source);
  const port = await freePort();
  const { child, output, ended } = spawnTsx([file], { PORT: String(port), HOST: "127.0.0.1" });
  try {
    await eventually(() => ready.test(output.stdout) || child.exitCode !== null, 20_000);
    expect(child.exitCode, output.stderr).to.equal(null);
  } catch (error) {
    child.kill("SIGKILL");
    rmSync(file);
    throw error;
  }
  let stopped: Promise<Ran> | undefined;
  return {
    port,
    output,
    /** SIGTERM, then its exit code; once, however often it is asked. */
    stop(): Promise<Ran> {
      stopped ??= (async () => {
        (child as ChildProcess).kill("SIGTERM");
        const ran = await ended;
        rmSync(file);
        return ran;
      })();
      return stopped;
    },
  };
}

/** Each command of a shell block, with `npx rollcall` the built CLI; comments dropped. */
async function shell(source: string): Promise<Ran[]> {
  const results: Ran[] = [];
  for (const line of source.trimEnd().split("\n")) {
    const words = line.replace(/#.*$/, "").trim().split(/ +/);
    expect(words.slice(0, 2), line).to.deep.equal(["npx", "rollcall"]);
    const child = spawn(process.execPath, [`${ROOT}dist/cli/main.js`, ...words.slice(2)], {
      env: { ...process.env, REDIS_URL: redisUrl(), NO_COLOR: "1" },
      timeout: 20_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    results.push({ code, stdout, stderr });
  }
  return results;
}

/** The prefixes the examples stored their settings under: each its own, none rollcall's. */
const prefixes = new Set<string>();

async function expectOwnPrefix(): Promise<void> {
  const stored = await client().keys("*:deployment");
  expect(stored, "one deployment per example").to.have.length(1);
  const prefix = stored[0]!.replace(/:deployment$/, "");
  expect(prefix, "an example's own prefix").to.not.equal("rollcall");
  expect(prefixes.has(prefix), `${prefix} is another example's`).to.equal(false);
  prefixes.add(prefix);
}

let launched: Promise<Browser> | undefined;
function browser(): Promise<Browser> {
  return (launched ??= chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  }));
}

/** A page whose module script is the example, after a script that defines what it leaves out. */
const pageOf = (example: string, context = "") =>
  `<!doctype html><input id="message" /><script>${context}</script>` +
  `<script type="module">${example}</script>`;

/** dist/client and dist/protocol as the demo serves them, at `base`. */
async function distFile(path: string, base: string): Promise<Buffer | undefined> {
  const match = new RegExp(`^${base}(client|protocol)/([A-Za-z]+\\.js)$`).exec(path);
  return match ? readFile(join(ROOT, "dist", match[1]!, match[2]!)) : undefined;
}

/** A page's console and uncaught errors, collected. */
async function openPage(url: string, route?: (page: Page) => Promise<unknown>) {
  const context = await (await browser()).newContext();
  const page = await context.newPage();
  const messages: string[] = [];
  const errors: string[] = [];
  page.on("console", (message) => messages.push(message.text()));
  page.on("pageerror", (error) => errors.push(error.message));
  await route?.(page);
  await page.goto(url);
  return { page, messages, errors, close: () => context.close() };
}

/** README's page: the demo's names for what it leaves out, and a gateway serving dist/. */
async function readmePage([source]: string[]): Promise<void> {
  const prefix = "example-page";
  const rollcall = new Rollcall(client(), { prefix });
  const gateway = new Gateway(rollcall, {
    authenticate: (request) =>
      bearerToken(request) === "t0ken" ? { user: "ann", rooms: ["doc-*"] } : null,
  });
  const errors: Error[] = [];
  gateway.on("error", (error) => errors.push(error));
  const context = `window.fetchToken = async () => "t0ken"; window.roomId = "doc-42";
    window.message = document.getElementById("message");
    window.rendered = []; window.render = (roster) => rendered.push(roster.count);`;
  const http: Server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    if (path === "/") {
      response.writeHead(200, { "Content-Type": "text/html" }).end(pageOf(source!, context));
      return;
    }
    distFile(path, "/").then(
      (body) => {
        if (!body) throw new Error("not served");
        response.writeHead(200, { "Content-Type": "text/javascript" }).end(body);
      },
      () => response.writeHead(404).end(),
    );
  });
  gateway.attach(http);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  const page = await openPage(`http://127.0.0.1:${port}/`);
  try {
    const ann = async () => (await rollcall.roster("doc-42")).members.find((m) => m.user === "ann");
    await eventually(async () => (await ann())?.state?.status === "away", 10_000, "ann away");
    await page.page.locator("#message").pressSequentially("hi");
    await eventually(async () => (await rollcall.roster("doc-42")).typing.includes("ann"));
    expect(page.errors).to.deep.equal([]);
    expect(errors).to.deep.equal([]);
  } finally {
    await page.close();
    await gateway.close();
    http.close();
  }
}

/** The Socket.IO server example, and its page served at its origin with dist/ at /rollcall/. */
async function socketIo([server, page]: string[]): Promise<void> {
  const prefix = /prefix: "([^"]+)"/.exec(server!)![1]!;
  const running = await startServer(server!, /^listening$/m);
  try {
    const origin = `http://127.0.0.1:${running.port}`;
    const opened = await openPage(`${origin}/`, (p) =>
      p.route(`${origin}/**`, async (route) => {
        const path = new URL(route.request().url()).pathname;
        if (path === "/") {
          await route.fulfill({ contentType: "text/html", body: pageOf(page!) });
          return;
        }
        const body = await distFile(path, "/rollcall/").catch(() => undefined);
        if (body) await route.fulfill({ contentType: "text/javascript", body });
        else await route.continue(); // the Socket.IO server's own: its client, its transport
      }),
    );
    const rollcall = new Rollcall(client(), {
      prefix,
      presenceWindowMs: 10_000,
      leaveGraceMs: 2_000,
    });
    const ann = async () => (await rollcall.roster("doc:42")).members.find((m) => m.user === "ann");
    try {
      await eventually(() => opened.messages.includes("present in doc:42: 1"), 10_000, "joined");
      await eventually(async () => (await ann())?.state?.status === "away", 10_000, "ann away");
      await eventually(() => opened.messages.includes("doc:42 update ann"), 5_000, "the update");
      await opened.page.locator("input").pressSequentially("hi");
      await eventually(async () => (await rollcall.roster("doc:42")).typing.includes("ann"));
      expect(opened.errors).to.deep.equal([]);
    } finally {
      await opened.close();
    }
  } finally {
    await running.stop();
  }
  const { code, stderr } = await running.stop();
  expect(code, stderr).to.equal(0);
  expect(stderr).to.equal("");
  await expectOwnPrefix();
}

/** The Hocuspocus server example, a provider of the test's joining its document. */
async function hocuspocus([server]: string[]): Promise<void> {
  const running = await startServer(server!, /^doc-42: 0 \[\]$/m);
  const editor = provider(`ws://127.0.0.1:${running.port}`, "doc-42", "s3cr3t");
  try {
    await eventually(() => /^doc-42 join ann$/m.test(running.output.stdout), 10_000, "the join");
  } finally {
    editor.destroy();
    await running.stop();
  }
  const { code, stderr } = await running.stop();
  expect(code, stderr).to.equal(0);
  expect(stderr).to.equal("");
  await expectOwnPrefix();
}
