import { execFile } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The checkout's root, where src/ and dist/ are. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

let building: Promise<void> | undefined;

/**
 * Builds dist/ with tsc, once per run, for the tests of what users run built: the CLI, the page,
 * the type declarations. tsc emits past a type error elsewhere in src/, so a failed build is
 * not an error here: expectBuilt() says whether what a test needs came out.
 */
export async function buildDist(): Promise<void> {
  // `npm test` builds dist/ once before its suites run two files at a time (ROLLCALL_DIST_BUILT):
  // a build per worker process would rewrite dist/ while the other runs what it holds.
  if (process.env.ROLLCALL_DIST_BUILT === "1") return;
  building ??= promisify(execFile)(join(ROOT, "node_modules/.bin/tsc"), [
    "-p",
    join(ROOT, "tsconfig.build.json"),
  ]).then(
    () => undefined,
    () => undefined,
  );
  await building;
}

/** Throws unless dist/ holds tsc's output of each of `paths` (under src/), newer than its source. */
export function expectBuilt(...paths: string[]): void {
  for (const path of paths) {
    const source = join(ROOT, "src", path);
    if (statSync(source).isDirectory()) {
      expectBuilt(...readdirSync(source).map((entry) => join(path, entry)));
      continue;
    }
    if (!path.endsWith(".ts")) continue;
    const out = join(ROOT, "dist", path.replace(/\.ts$/, ".js"));
    let built = 0;
    try {
      built = statSync(out).mtimeMs;
    } catch {
      // not built at all
    }
    if (built < statSync(source).mtimeMs)
      throw new Error(`dist/ is stale: tsc did not rebuild ${path}`);
  }
}
