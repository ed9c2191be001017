// Optional peer dependencies, loaded only by the entries that use them. A missing one is an error
// that names the entry, the package and the line that installs it, instead of a bare
// ERR_MODULE_NOT_FOUND (which a static import raises before any code of the module runs).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** A CommonJS peer, loaded at once with require(). */
export function requirePeer<T>(name: string, by: string): T {
  try {
    return require(name) as T;
  } catch (error) {
    throw missingPeer(error, name, by);
  }
}

/** An ES module peer, imported by `load` (a literal import(), which TypeScript types). */
export async function importPeer<T>(load: () => Promise<T>, name: string, by: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw missingPeer(error, name, by);
  }
}

/** The error that says what to install when `name` itself is missing; any other is its own. */
function missingPeer(error: unknown, name: string, by: string): unknown {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const pkg = name.startsWith("@") ? name.split("/", 2).join("/") : name.split("/", 1)[0]!;
  const missing =
    (code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") &&
    typeof message === "string" &&
    (message.includes(`'${pkg}'`) || message.includes(`'${pkg}/`));
  if (!missing) return error;
  return new Error(
    `${by} needs ${pkg}, an optional peer dependency of rollcall: npm install ${pkg}@${range(pkg)}`,
    { cause: error },
  );
}

/** The range rollcall's package.json gives the peer (../../package.json from src/ and dist/). */
function range(pkg: string): string {
  try {
    const manifest = JSON.parse(
      readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
    ) as { peerDependencies?: Record<string, string> };
    return `"${manifest.peerDependencies?.[pkg] ?? "latest"}"`;
  } catch {
    return "latest";
  }
}
