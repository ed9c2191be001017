/** A failure the CLI reports in one line and exits with: 2 for a usage error, 1 for the rest. */
export class CliError extends Error {
  constructor(
    readonly exitCode: 1 | 2,
    message: string,
    /** The command line itself was wrong: a pointer to --help follows the message. */
    readonly usage = false,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** The command line's shape is wrong (a command, an option, an argument). */
export const usageError = (message: string) => new CliError(2, message, true);

/** A value on the command line is wrong: the message says which and why. */
export const badValue = (message: string) => new CliError(2, message);

/**
 * An error as the CLI prints it, after its own "rollcall: ": the library's messages start with
 * "rollcall" too, which would then read twice.
 */
export function problem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/^rollcall:? /, "");
}
