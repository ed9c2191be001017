#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { InvalidInputError } from "../protocol/errors.js";
import { parseCommandLine, USAGE, type Command, type CommandName } from "./args.js";
import { check } from "./commands/check.js";
import { roster } from "./commands/roster.js";
import { settings } from "./commands/settings.js";
import { stats } from "./commands/stats.js";
import { status } from "./commands/status.js";
import { sweep } from "./commands/sweep.js";
import { watch } from "./commands/watch.js";
import { CliError, problem } from "./errors.js";

const COMMANDS: Record<CommandName, (command: Command) => Promise<number>> = {
  roster,
  watch,
  status,
  stats,
  sweep,
  settings,
  check,
};

async function main(argv: readonly string[]): Promise<number> {
  const invocation = parseCommandLine(argv);
  if (invocation.kind === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (invocation.kind === "version") {
    // ../../package.json from src/cli and dist/cli alike.
    const file = new URL("../../package.json", import.meta.url);
    const { version } = JSON.parse(readFileSync(file, "utf8")) as { version: string };
    process.stdout.write(`rollcall ${version}\n`);
    return 0;
  }
  return COMMANDS[invocation.command](invocation);
}

/**
 * One line on stderr (and a pointer to --help after a usage error), never a stack trace. 2 for
 * usage errors (and input the library refuses, such as a malformed room id), 1 for failures:
 * Redis unreachable, a call that failed.
 */
function fail(error: unknown): number {
  process.stderr.write(`rollcall: ${problem(error)}\n`);
  if (error instanceof CliError) {
    if (error.usage) process.stderr.write("Run rollcall --help for the usage.\n");
    return error.exitCode;
  }
  return error instanceof InvalidInputError ? 2 : 1;
}

// A reader that went away (`rollcall stats | head`) is no failure: there is just no one to tell.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  process.exit(fail(error));
});

// The exit code is set, not forced: output still drains, and every command closes its
// connections, so the process ends by itself.
main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (error: unknown) => (process.exitCode = fail(error)),
);
