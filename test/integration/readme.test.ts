import { expect } from "chai";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { redisUrl } from "../kit/redis.js";

const run = promisify(execFile);

// What each TypeScript example of the README prints, in order.
const README = [
  "1 { status: 'online' }",
  "event: join bob\nchange: join bob 1",
  "logged: join cy",
  "gateway on a port: true sockets: 0",
];

// What each TypeScript example of docs/internet.md prints.
const INTERNET = ["listening: true"];

for (const [doc, EXPECTED] of [
  ["README.md", README],
  ["docs/internet.md", INTERNET],
] as const)
  describe(doc, () => {
    const readme = readFileSync(new URL(`../../${doc}`, import.meta.url), "utf8");
    const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);

    it("has the examples this test knows", () => {
      expect(examples).to.have.length(EXPECTED.length);
    });

    EXPECTED.forEach((expected, i) => {
      it(`runs example ${i + 1} as written`, async function () {
        this.timeout(60_000);
        // The package's own name resolves to dist/, which needs a build; the sources are the same.
        const file = new URL(`./readme-example-${doc.length}-${i}.tmp.ts`, import.meta.url);
        const source = examples[i]!.replace(
          'from "rollcall/gateway"',
          'from "../../src/gateway/index.js"',
        );
        writeFileSync(file, source.replace('from "rollcall"', 'from "../../src/index.js"'));
        try {
          const { stdout } = await run("npx", ["tsx", file.pathname], {
            env: { ...process.env, REDIS_URL: redisUrl() },
          });
          expect(stdout.trim()).to.equal(expected);
        } finally {
          rmSync(file);
        }
      });
    });
  });
