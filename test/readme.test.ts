import { expect } from "chai";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { redisUrl } from "./support.js";

const run = promisify(execFile);

describe("README", () => {
  it("runs its usage example as written", async function () {
    this.timeout(60_000);
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example, "a ts block in the README").to.be.a("string");
    // The package's own name resolves to dist/, which needs a build; the sources are the same.
    const file = new URL("./readme-example.tmp.ts", import.meta.url);
    writeFileSync(file, example!.replace('from "rollcall"', 'from "../src/rollcall.js"'));
    try {
      const { stdout } = await run("npx", ["tsx", file.pathname], {
        env: { ...process.env, REDIS_URL: redisUrl() },
      });
      expect(stdout.trim()).to.equal("1 { status: 'online' }");
    } finally {
      rmSync(file);
    }
  });
});
