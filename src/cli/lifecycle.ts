/**
 * Process lifecycle of one CLI run: cleanups (close connections, stop the embedded redis-server) run
 * in reverse order on every way out, and SIGINT/SIGTERM go to the running command when it handles
 * them (a worker finishing its jobs); a second signal, or one no command handles, cleans up and exits.
 */

type Cleanup = () => Promise<void> | void;

const cleanups: Cleanup[] = [];
let interruptHandler: ((signal: NodeJS.Signals) => void) | null = null;
let signalsSeen = 0;
let installed = false;
let outputClosed = false;

/** Registers `fn` to run before the process exits; returns a function that unregisters it. */
export function addCleanup(fn: Cleanup): () => void {
  cleanups.push(fn);
  return () => {
    const i = cleanups.indexOf(fn);
    if (i >= 0) cleanups.splice(i, 1);
  };
}

/** Runs every cleanup (latest first), each at most once; errors are reported, not thrown. */
export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`surety: cleanup failed: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
}

/**
 * Lets the running command handle the first SIGINT/SIGTERM (e.g. close gracefully). Returns a
 * function that gives the signals back.
 */
export function onInterrupt(fn: (signal: NodeJS.Signals) => void): () => void {
  interruptHandler = fn;
  // Output already closed (see installPipeHandlers): a command starting to wait now stops at once.
  if (outputClosed) queueMicrotask(() => interruptHandler === fn && interruptForClosedOutput());
  return () => {
    if (interruptHandler === fn) interruptHandler = null;
  };
}

/** A promise for the first SIGINT/SIGTERM, handled by the caller (see onInterrupt). */
export function nextInterrupt(): { signal: Promise<NodeJS.Signals>; release: () => void } {
  let release: () => void = () => {};
  const signal = new Promise<NodeJS.Signals>((resolve) => {
    release = onInterrupt(resolve);
  });
  return { signal, release };
}

export function installSignalHandlers(): void {
  if (installed) return;
  installed = true;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      signalsSeen++;
      if (interruptHandler && signalsSeen === 1) {
        interruptHandler(sig);
        return;
      }
      if (signalsSeen > 1) process.stderr.write(`surety: ${sig} again: stopping now\n`);
      void runCleanups().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
    });
  }
}

/** True once stdout or stderr was closed by its reader (EPIPE): output is dropped from then on. */
export function isOutputClosed(): boolean {
  return outputClosed;
}

/**
 * A closed stdout or stderr (`surety jobs emails | head -1`) is not a failure: Node reports the
 * broken pipe as an `error` event that, unhandled, killed the CLI with an EPIPE stack. Now output
 * is dropped from then on; a command waiting for Ctrl-C (stats --watch, worker, reaper, dashboard)
 * is asked to stop as on an interrupt (signal 'SIGPIPE'), any other command finishes its work
 * silently, and the exit code is the command's. Other stream errors are not hidden.
 */
export function installPipeHandlers(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (outputClosed) return; // a later write to the stream the broken pipe destroyed
      if (err.code !== 'EPIPE') throw err;
      outputClosed = true;
      interruptForClosedOutput();
    });
  }
}

/** The closed output counts as the first interrupt: a later Ctrl-C stops at once. */
function interruptForClosedOutput(): void {
  if (!interruptHandler || signalsSeen > 0) return;
  signalsSeen++;
  interruptHandler('SIGPIPE');
}

/** Resolves once everything written to stdout and stderr has been handed to the OS. */
export async function flushOutput(): Promise<void> {
  await Promise.all(
    [process.stdout, process.stderr].map(
      (s) =>
        new Promise<void>((resolve) => (s.writableLength === 0 ? resolve() : s.write('', () => resolve()))),
    ),
  );
}
