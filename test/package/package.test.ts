// The package as a user gets it. `npm pack` runs in a copy of the checkout's files without
// dist/ (a clean clone: prepack builds), and npm installs the tarball into empty projects, each
// with only the peers its docs name (at the versions this checkout tests, from npm's cache when
// it holds them). Each project imports its entries from ESM and require(), runs them against the
// test's Redis, and compiles TypeScript that uses them: strict, skipLibCheck off.
import { expect } from "chai";
import { execFile } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ROOT } from "../kit/build.js";
import { redisUrl } from "../kit/redis.js";

const run = promisify(execFile);
/**
 * The sources, loaded as the rest of the test process loads them (an import() here would load
 * yjs a second time, as an ES module, beside the copy the other suites' Hocuspocus uses).
 */
const load = createRequire(import.meta.url);
const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));
const MANIFEST = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  name: string;
  version: string;
  exports: Record<string, string | { default: string }>;
};

/** Files of ./fixtures (what the user writes), compiled together: one tsc run. */
interface Program {
  files: string[];
  lib?: string[];
  /** Node's types: a server's code has them, a page's does not. */
  node?: boolean;
}

interface Consumer {
  name: string;
  /** What the project installs besides the tarball: the peers its docs name, and Node's types. */
  packages: string[];
  /** Entries of the package it imports (the keys of package.json's exports). */
  entries: string[];
  programs: Program[];
  /** What its node_modules must not hold, even as a dependency of one of `packages`. */
  without: string[];
  /**
   * Errors tsc finds in these packages' own declarations are theirs, and ignored (not rollcall's
   * nor the fixture's, nor fixed by a package the docs could name): with skipLibCheck off,
   * @hocuspocus/common 3.4's auth.d.ts imports a relative path without its extension (TS2834
   * under NodeNext), and yjs's declarations name DOM types (Document, Node, self) a server's lib
   * has not. @hocuspocus/server's own errors count: without @types/ws it fails TS7016.
   */
  foreign?: string[];
}

const SERVER = ["ioredis", "@types/node"];
const CONSUMERS: Consumer[] = [
  {
    // The core entry and the browser helpers: no jose, ws, @types/ws or @opentelemetry/api.
    name: "core",
    packages: SERVER,
    entries: [".", "./client", "./socket.io/client"],
    programs: [
      { files: ["core.ts", "require.cts"], node: true },
      { files: ["client.ts", "socketioClient.ts"], lib: ["ES2022", "DOM"] },
    ],
    without: ["ws", "@types/ws", "jose", "@opentelemetry/api", "socket.io", "y-protocols"],
  },
  {
    // The gateway with its own authenticate hook: ws and its types, no jose.
    name: "gateway",
    packages: [...SERVER, "ws", "@types/ws"],
    entries: ["./gateway"],
    programs: [{ files: ["gateway.ts"], node: true }],
    without: ["jose"],
  },
  {
    // Socket.IO presence: socket.io and what it brings, no jose, no socket.io-client.
    name: "socket.io",
    packages: [...SERVER, "socket.io"],
    entries: ["./socket.io"],
    programs: [{ files: ["socketio.ts"], node: true }],
    without: ["jose", "socket.io-client"],
  },
  {
    // Hocuspocus presence: @hocuspocus/server (npm adds its peers y-protocols and yjs) and
    // @types/ws, which its declarations need; no jose or provider.
    name: "hocuspocus",
    packages: [...SERVER, "@hocuspocus/server", "@types/ws"],
    entries: ["./hocuspocus"],
    programs: [{ files: ["hocuspocus.ts"], node: true }],
    without: ["jose", "@hocuspocus/provider"],
    foreign: ["@hocuspocus/common", "yjs"],
  },
  {
    // Presence on a Fastify route: fastify and @fastify/websocket, whose declarations need ws's.
    name: "fastify",
    packages: [...SERVER, "fastify", "@fastify/websocket", "@types/ws"],
    entries: ["./fastify"],
    programs: [{ files: ["fastify.ts"], node: true }],
    without: ["jose", "socket.io", "@hocuspocus/server"],
  },
];

/** A package at the version this checkout's node_modules holds: what the tests ran against. */
function pinned(name: string): string {
  const { version } = JSON.parse(
    readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8"),
  ) as { version: string };
  return `${name}@${version}`;
}

/** How a user names an entry: "rollcall", "rollcall/gateway". */
const specifier = (entry: string) => MANIFEST.name + entry.slice(1);

/** The entry's source module, whose exports the built one must have. */
function sourceOf(entry: string): string {
  const target = MANIFEST.exports[entry]!;
  const built = typeof target === "string" ? target : target.default;
  return join(ROOT, built.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts"));
}

/** Every file a fresh clone of the checkout holds (tracked or new, not ignored), copied. */
async function cloneOfCheckout(to: string): Promise<void> {
  const { stdout } = await run(
    "git",
    ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    {
      cwd: ROOT,
      maxBuffer: 16 << 20,
    },
  );
  for (const file of new Set(stdout.split("\0").filter(Boolean))) {
    if (!existsSync(join(ROOT, file))) continue; // deleted, not yet committed
    mkdirSync(dirname(join(to, file)), { recursive: true });
    cpSync(join(ROOT, file), join(to, file));
  }
  // prepack's tsc, from the checkout's own dependencies.
  symlinkSync(join(ROOT, "node_modules"), join(to, "node_modules"), "dir");
}

interface Packed {
  filename: string;
  files: { path: string }[];
}

async function npm(cwd: string, args: string[]): Promise<string> {
  const { stdout } = await run(
    "npm",
    [...args, "--no-audit", "--no-fund", "--no-update-notifier"],
    {
      cwd,
      maxBuffer: 16 << 20,
    },
  );
  return stdout;
}

/** What a script printed, or what it printed on stderr when it failed. */
async function node(cwd: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, args, {
      cwd,
      env: { ...process.env, REDIS_URL: redisUrl(), NO_COLOR: "1" },
    });
    return stdout;
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(`${args.join(" ")} failed:\n${stderr || stdout || String(error)}`, {
      cause: error,
    });
  }
}

/** Runs a module that prints the names each entry exports, with `undefined` ones marked. */
function exportsScript(entries: string[], kind: "esm" | "cjs"): string {
  const load = kind === "esm" ? "await import(entry)" : "require(entry)";
  const body = `const names = {};
for (const entry of ${JSON.stringify(entries.map(specifier))}) {
  const module = ${load};
  names[entry] = Object.keys(module)
    .filter((name) => name !== "__esModule")
    .map((name) => (module[name] === undefined ? name + " is undefined" : name))
    .sort();
}
console.log(JSON.stringify(names));`;
  return kind === "esm" ? body : `"use strict";\n${body}`;
}

describe("the package, packed and installed into empty projects", function () {
  this.timeout(60_000);
  let dir: string;
  let packed: Packed;
  const projects = new Map<string, string>();
  /** Each program's compilation, started once the projects are installed, two at a time. */
  const compiled = new Map<Program, Promise<void>>();

  before(async function () {
    this.timeout(180_000);
    dir = mkdtempSync(join(tmpdir(), "rollcall-package-"));
    const clone = join(dir, "clone");
    await cloneOfCheckout(clone);
    const json = await npm(clone, ["pack", "--json", "--pack-destination", dir]);
    [packed] = JSON.parse(json) as [Packed];
    const tarball = join(dir, packed.filename);
    await Promise.all(
      CONSUMERS.map(async ({ name, packages }) => {
        const project = join(dir, name.replace(/\W/g, "-"));
        mkdirSync(project);
        writeFileSync(
          join(project, "package.json"),
          JSON.stringify({
            name: `consumer-${name}`.replace(/\W/g, "-"),
            private: true,
            type: "module",
          }),
        );
        await npm(project, ["install", "--prefer-offline", tarball, ...packages.map(pinned)]);
        projects.set(name, project);
      }),
    );
    const previous: Promise<unknown>[] = [Promise.resolve(), Promise.resolve()];
    CONSUMERS.flatMap(({ name, programs, foreign = [] }) =>
      programs.map((p) => ({ name, p, foreign })),
    ).forEach(({ name, p, foreign }, i) => {
      const done = previous[i % 2]!.then(() => compile(projects.get(name)!, p, foreign));
      compiled.set(p, done);
      // Failures are the tests' to report, each its own.
      previous[i % 2] = done.catch(() => undefined);
    });
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const installed = (path: string) => join(projects.get("core")!, "node_modules", "rollcall", path);

  it("holds the built code, the scripts, LICENSE and README, and nothing of the checkout else", () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).to.include.members([
      "LICENSE",
      "README.md",
      "package.json",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/cli/main.js",
      "lua/heartbeat-4.lua",
    ]);
    const outside = paths.filter(
      (p) => !/^(dist|lua)\//.test(p) && !["LICENSE", "README.md", "package.json"].includes(p),
    );
    expect(outside).to.deep.equal([]);
    expect(paths.filter((p) => /^dist\/(dev|embedded)/.test(p))).to.deep.equal([]);
    for (const target of Object.values(MANIFEST.exports)) {
      const built = typeof target === "string" ? target : target.default;
      expect(paths).to.include(built.slice(2));
    }
    expect(readFileSync(installed("LICENSE"), "utf8")).to.match(/^MIT License/);
  });

  it("ships source maps that resolve: each carries the sources it maps", () => {
    const maps: string[] = [];
    const walk = (path: string) => {
      for (const entry of readdirSync(path, { withFileTypes: true })) {
        const full = join(path, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.name.endsWith(".map")) maps.push(full);
      }
    };
    walk(installed("dist"));
    expect(maps.length).to.be.greaterThan(40);
    for (const map of maps) {
      const { sources, sourcesContent } = JSON.parse(readFileSync(map, "utf8")) as {
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      expect(sourcesContent, map).to.have.length(sources.length);
      expect(
        sourcesContent!.every((s) => typeof s === "string" && s.length > 0),
        map,
      ).to.equal(true);
    }
  });

  it("covers every entry of package.json's exports", () => {
    const covered = CONSUMERS.flatMap((c) => c.entries).sort();
    const entries = Object.keys(MANIFEST.exports).filter((e) => e !== "./package.json");
    expect(covered).to.deep.equal(entries.sort());
  });

  for (const consumer of CONSUMERS) {
    describe(`with ${consumer.packages.join(", ")}`, () => {
      const project = () => projects.get(consumer.name)!;

      it(`holds none of ${consumer.without.join(", ")}`, () => {
        for (const name of consumer.without) {
          expect(existsSync(join(project(), "node_modules", name)), name).to.equal(false);
        }
      });

      for (const kind of ["esm", "cjs"] as const) {
        const how = kind === "esm" ? "import" : "require()";
        it(`${how}s ${consumer.entries.map(specifier).join(", ")} with every export`, async () => {
          const file = `exports.${kind === "esm" ? "mjs" : "cjs"}`;
          writeFileSync(join(project(), file), exportsScript(consumer.entries, kind));
          const names = JSON.parse(await node(project(), [file])) as Record<string, string[]>;
          for (const entry of consumer.entries) {
            const source = load(sourceOf(entry)) as Record<string, unknown>;
            expect(names[specifier(entry)], specifier(entry)).to.deep.equal(
              Object.keys(source).sort(),
            );
          }
        });
      }

      for (const program of consumer.programs) {
        it(`compiles ${program.files.join(" and ")} (strict, skipLibCheck off)`, async () => {
          await compiled.get(program);
        });
      }
    });
  }

  it("runs its scripts from the tarball: a heartbeat, the roster, and the CLI's view of it", async () => {
    const project = projects.get("core")!;
    const prefix = `package-${process.pid}`;
    writeFileSync(
      join(project, "heartbeat.cjs"),
      `const { Redis } = require("ioredis");
const { Rollcall } = require("rollcall");
const redis = new Redis(process.env.REDIS_URL);
const presence = new Rollcall(redis, { prefix: ${JSON.stringify(prefix)} });
presence
  .heartbeat("doc-1", "ann", "tab-1")
  .then(({ joined }) => console.log("joined:", joined))
  .finally(() => redis.disconnect());
`,
    );
    expect(await node(project, ["heartbeat.cjs"])).to.equal("joined: true\n");
    const cli = join(project, "node_modules", ".bin", "rollcall");
    const target = ["--redis", redisUrl(), "--prefix", prefix];
    const roster = JSON.parse(
      await node(project, [cli, ...target, "roster", "doc-1", "--json"]),
    ) as {
      count: number;
    };
    expect(roster).to.include({ count: 1 });
    expect(await node(project, [cli, "--version"])).to.equal(`rollcall ${MANIFEST.version}\n`);
  });

  it("says which package to install when a peer of the gateway or of Hocuspocus is missing", async () => {
    const core = projects.get("core")!;
    writeFileSync(
      join(core, "gateway.mjs"),
      'await import("rollcall/gateway").catch((error) => console.log(error.message));\n',
    );
    expect(await node(core, ["gateway.mjs"])).to.equal(
      'rollcall/gateway needs ws, an optional peer dependency of rollcall: npm install ws@"^8.0.0"\n',
    );
    // Without y-protocols, rollcall/hocuspocus loads, and the server's listen() (its onListen
    // hook) rejects with the words.
    writeFileSync(
      join(core, "hocuspocus.mjs"),
      `import { Redis } from "ioredis";
import { Rollcall } from "rollcall";
import { HocuspocusPresence } from "rollcall/hocuspocus";

const redis = new Redis(process.env.REDIS_URL);
const presence = new HocuspocusPresence(new Rollcall(redis, { prefix: "no-y-protocols" }), {
  sweeper: false,
});
await presence.onListen().catch((error) => console.log(error.message));
await presence.close();
redis.disconnect();
`,
    );
    expect(await node(core, ["hocuspocus.mjs"])).to.equal(
      'rollcall/hocuspocus needs y-protocols, an optional peer dependency of rollcall: npm install y-protocols@"^1.0.6"\n',
    );

    const gateway = projects.get("gateway")!;
    writeFileSync(
      join(gateway, "jwt.mjs"),
      `import { Redis } from "ioredis";
import { Rollcall } from "rollcall";
import { Gateway } from "rollcall/gateway";

const redis = new Redis(process.env.REDIS_URL);
const gateway = new Gateway(new Rollcall(redis, { prefix: "no-jose" }), {
  jwt: { secret: "at least 32 bytes of secret for HS256" },
  sweeper: false,
});
gateway.on("error", () => undefined); // the same failure, reported
await gateway.listen(0).catch((error) => console.log(error.message));
await gateway.close();
redis.disconnect();
`,
    );
    expect(await node(gateway, ["jwt.mjs"])).to.equal(
      `rollcall/gateway's jwt option needs jose, an optional peer dependency of rollcall: npm install jose@"^6.0.0"\n`,
    );
  });
});

/** tsc over a program in the project; rejects on an error that is not a foreign package's. */
async function compile(project: string, program: Program, foreign: string[]): Promise<void> {
  const config = `tsconfig.${program.files[0]}.json`;
  for (const file of program.files) cpSync(join(FIXTURES, file), join(project, file));
  const compilerOptions = {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    skipLibCheck: false,
    noEmit: true,
    lib: program.lib ?? ["ES2022"],
    types: program.node ? ["node"] : [],
  };
  writeFileSync(join(project, config), JSON.stringify({ compilerOptions, files: program.files }));
  const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
  await run(process.execPath, [tsc, "-p", config], { cwd: project }).catch(
    (error: Error & { stdout?: string }) => {
      const theirs = (line: string) =>
        foreign.some((name) => line.includes(`node_modules/${name}/`));
      const ours = (error.stdout ?? "").split("\n").filter((l) => /error TS/.test(l) && !theirs(l));
      if (error.stdout && foreign.length > 0 && ours.length === 0) return;
      throw new Error(`tsc failed:\n${error.stdout || error.message}`);
    },
  );
}
