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

/** Resolves once everything written to stdout and stderr has been handed to the OS. */
export async function flushOutput(): Promise<void> {
  await Promise.all(
    [process.stdout, process.stderr].map(
      (s) =>
        new Promise<void>((resolve) => (s.writableLength === 0 ? resolve() : s.write('', () => resolve()))),
    ),
  );
}
