// `rollcall/gateway`'s declarations stand without jose: an app that authenticates with its own
// hook never installs it, and its type check (skipLibCheck off) must still pass.
import { expect } from "chai";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");

const CONSUMER = `
import type { IncomingMessage } from "node:http";
import { Redis } from "ioredis";
import { Rollcall } from "rollcall";
import { AuthError, CLOSE, Gateway, refreshOf, type Claims, type GatewayOptions, type Identity } from "rollcall/gateway";

const options: GatewayOptions = {
  authenticate: (request: IncomingMessage): Identity | null => {
    if (refreshOf(request)) return null;
    if (!request.headers.cookie) throw new AuthError(401, "no-token", "no session");
    const claims: Claims = { sub: "ann" };
    return { user: String(claims.sub), rooms: ["doc"], expiresAt: Date.now() + 60_000 };
  },
  origins: ["https://app.example"],
  limits: { maxSocketsPerUser: 8 },
};
const gateway = new Gateway(new Rollcall(new Redis()), options);
const code: number = CLOSE.tokenExpired;
void gateway.listen(0).then(() => gateway.close());
export { code };
`;

describe("rollcall/gateway's type declarations", function () {
  this.timeout(120_000);

  it("compile in an app without jose, with skipLibCheck off", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rollcall-types-"));
    try {
      const pkg = join(dir, "node_modules/rollcall");
      mkdirSync(pkg, { recursive: true });
      const run = promisify(execFile);
      await run(process.execPath, [
        TSC,
        "-p",
        join(ROOT, "tsconfig.build.json"),
        "--outDir",
        join(pkg, "dist"),
      ]);
      cpSync(join(ROOT, "package.json"), join(pkg, "package.json"));
      // What an app would have: the required peers and Node's types, and no jose.
      for (const dep of [
        "ioredis",
        "ws",
        "@types/ws",
        "@types/node",
        "@opentelemetry/api",
        "undici-types",
      ]) {
        mkdirSync(join(dir, "node_modules", dep, ".."), { recursive: true });
        symlinkSync(join(ROOT, "node_modules", dep), join(dir, "node_modules", dep));
      }
      writeFileSync(join(dir, "app.ts"), CONSUMER);
      writeFileSync(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            skipLibCheck: false,
            noEmit: true,
            types: ["node"],
          },
          files: ["app.ts"],
        }),
      );
      const result = await run(process.execPath, [TSC, "-p", dir]).then(
        () => "ok",
        (error: Error & { stdout?: string }) => error.stdout ?? error.message,
      );
      expect(result).to.equal("ok");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
