import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { format } from "prettier";

const RESULTS = fileURLToPath(new URL("results.md", import.meta.url));

/**
 * Writes one runner's section of results.md (between `<!-- section: NAME -->` and
 * `<!-- /section: NAME -->`), keeping the other runners' sections; a new one goes at the end.
 * Returns the file's path.
 */
export async function saveSection(name: string, markdown: string): Promise<string> {
  const open = `<!-- section: ${name} -->`;
  const close = `<!-- /section: ${name} -->`;
  const section = `${open}\n\n${markdown.trim()}\n\n${close}`;
  const text = existsSync(RESULTS) ? readFileSync(RESULTS, "utf8") : "";
  const start = text.indexOf(open);
  const end = text.indexOf(close);
  const whole =
    start >= 0 && end > start
      ? text.slice(0, start) + section + text.slice(end + close.length)
      : `${text.trimEnd()}\n\n${section}\n`;
  writeFileSync(RESULTS, await format(whole, { parser: "markdown", printWidth: 100 }));
  return RESULTS;
}
