/**
 * Everything the harness started (redis-server, worker children) is registered here and ended on
 * every way out: normal end, error, SIGINT/SIGTERM, and, as a last resort, synchronously on exit.
 */
import { rmSync } from 'node:fs';

interface Resource {
  /** Graceful async stop. */
  stop(): Promise<void>;
  /** Last-resort synchronous kill (process 'exit' handler). */
  killSync(): void;
}

const resources = new Set<Resource>();
let installed = false;

export function track(resource: Resource): () => void {
  resources.add(resource);
  return () => resources.delete(resource);
}

export function trackPid(pid: number | undefined, dir?: string): () => void {
  return track({
    stop: async () => {
      killQuietly(pid);
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
    killSync: () => {
      killQuietly(pid);
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  });
}

function killQuietly(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

export async function cleanupAll(): Promise<void> {
  const all = [...resources];
  resources.clear();
  await Promise.allSettled(all.map((r) => r.stop()));
}

export function installExitHandlers(): void {
  if (installed) return;
  installed = true;
  process.on('exit', () => {
    for (const r of resources) r.killSync();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\n${signal}: stopping redis-server and workers\n`);
      cleanupAll().finally(() => process.exit(130));
    });
  }
}
