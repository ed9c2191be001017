// The package's type declarations as a TypeScript user compiles them: skipLibCheck off, in a
// directory of its own whose node_modules holds the built package and only what a consumer names.
import { expect } from "chai";
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { buildDist, expectBuilt, ROOT } from "../kit/build.js";

const run = promisify(execFile);
const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));

interface Consumer {
  /** A file of ./fixtures: what the user writes. */
  fixture: string;
  /** What its node_modules holds besides rollcall (each with its own dependencies). */
  packages: string[];
  /** What its node_modules must not hold, even as a dependency of one of `packages`. */
  without?: string[];
  lib?: string[];
}

const NODE = ["ioredis", "@types/node"];
const CONSUMERS: Consumer[] = [
  // The core entry: no jose, ws, @types/ws or @opentelemetry/api.
  { fixture: "core.ts", packages: NODE },
  // The browser client: nothing extra.
  { fixture: "client.ts", packages: [], lib: ["ES2022", "DOM"] },
  // The gateway: ws and its types, and no jose (an app with its own authenticate hook).
  { fixture: "gateway.ts", packages: [...NODE, "ws", "@types/ws"], without: ["jose"] },
  // Socket.IO presence: socket.io and what it brings, no jose, no socket.io-client.
  {
    fixture: "socketio.ts",
    packages: [...NODE, "socket.io"],
    without: ["jose", "socket.io-client"],
  },
  // Its browser helper: nothing extra.
  { fixture: "socketioClient.ts", packages: [], lib: ["ES2022", "DOM"] },
];

/** A package and what it depends on, copied from this checkout's node_modules. */
function install(modules: string, name: string, done = new Set<string>()): void {
  if (done.has(name)) return;
  done.add(name);
  const from = join(ROOT, "node_modules", name);
  cpSync(from, join(modules, name), { recursive: true, dereference: true });
  const manifest = JSON.parse(readFileSync(join(from, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
  };
  for (const dependency of Object.keys(manifest.dependencies ?? {})) {
    install(modules, dependency, done);
  }
}

/** tsc over one file in a fresh project; resolves to what it printed, rejects on an error. */
async function compile(
  source: string,
  { packages, without = [], lib = ["ES2022"] }: Omit<Consumer, "fixture">,
) {
  const dir = mkdtempSync(join(tmpdir(), "rollcall-types-"));
  try {
    const modules = join(dir, "node_modules");
    cpSync(join(ROOT, "package.json"), join(modules, "rollcall", "package.json"));
    cpSync(join(ROOT, "dist"), join(modules, "rollcall", "dist"), { recursive: true });
    for (const name of packages) install(modules, name);
    for (const name of without) {
      if (existsSync(join(modules, name))) throw new Error(`${name} came with ${packages.join()}`);
    }
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
    writeFileSync(join(dir, "consumer.ts"), source);
    const compilerOptions = {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      skipLibCheck: false,
      noEmit: true,
      lib,
      types: packages.includes("@types/node") ? ["node"] : [],
    };
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions }));
    const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
    return await run(process.execPath, [tsc, "-p", dir]).catch(
      (error: Error & { stdout?: string }) => {
        throw new Error(`tsc failed:\n${error.stdout || error.message}`);
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the type declarations, for a TypeScript user with skipLibCheck off", function () {
  this.timeout(60_000);

  before(async function () {
    this.timeout(120_000);
    await buildDist();
    expectBuilt("index.ts", "client", "gateway", "socketio", "engine", "protocol", "runtime");
  });

  for (const { fixture, ...consumer } of CONSUMERS) {
    const without = consumer.without ? `, without ${consumer.without.join(", ")}` : "";
    const packages = consumer.packages.join(", ") || "nothing else";
    it(`compile ${fixture} with ${packages}${without}`, async () => {
      await compile(readFileSync(join(FIXTURES, fixture), "utf8"), consumer);
    });
  }

  it("come without what a consumer does not name: its own import of one fails", async () => {
    const source = 'import type { Meter } from "@opentelemetry/api";\nexport type M = Meter;\n';
    const failure = await compile(source, { packages: NODE }).catch((e: Error) => e.message);
    expect(failure).to.match(/Cannot find module '@opentelemetry\/api'/);
  });
});
