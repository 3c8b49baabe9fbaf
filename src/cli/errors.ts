/**
 * How the CLI fails: one line on stderr (`surety: <message>`, with the SuretyError code when there is
 * one), no stack trace unless DEBUG=surety, and an exit code scripts can branch on.
 */
import { SuretyError, ValidationError } from '../errors.js';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** Bad command-line input (missing argument, malformed JSON, bad duration): exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure with a message meant for the user as is (no code, no stack): exit code 1 by default. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode = EXIT_FAILURE,
  ) {
    super(message);
  }
}

interface CommanderLike {
  code: string;
  exitCode: number;
}

function isCommanderError(err: unknown): err is Error & CommanderLike {
  return (
    err instanceof Error && typeof (err as Partial<CommanderLike>).code === 'string' && 'exitCode' in err
  );
}

export function debugEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.DEBUG ?? '').split(/[\s,]+/).some((d) => d === 'surety' || d === 'surety:*' || d === '*');
}

/** The one line to print for `err` and the process exit code. */
export function describeError(err: unknown): { message: string; exitCode: number } {
  if (err instanceof UsageError) return { message: err.message, exitCode: EXIT_USAGE };
  if (err instanceof CliError) return { message: err.message, exitCode: err.exitCode };
  // Input refused by the library's validation (queue name, job id, option range): a usage error.
  if (err instanceof ValidationError) return { message: `${err.code}: ${err.message}`, exitCode: EXIT_USAGE };
  if (err instanceof SuretyError) return { message: `${err.code}: ${err.message}`, exitCode: EXIT_FAILURE };
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const prefix = typeof code === 'string' && !err.message.includes(code) ? `${code}: ` : '';
    return { message: `${prefix}${err.message}`, exitCode: EXIT_FAILURE };
  }
  return { message: String(err), exitCode: EXIT_FAILURE };
}

/** Writes the error line (and the stack with DEBUG=surety); returns the exit code. */
export function reportError(err: unknown): number {
  if (isCommanderError(err)) {
    // Commander already printed its message; help and version are not errors.
    if (
      err.code === 'commander.helpDisplayed' ||
      err.code === 'commander.version' ||
      err.code === 'commander.help'
    )
      return EXIT_OK;
    return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  }
  const { message, exitCode } = describeError(err);
  process.stderr.write(`surety: ${message.split('\n')[0]}\n`);
  if (debugEnabled() && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  return exitCode;
}
