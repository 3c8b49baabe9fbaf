/**
 * Worker child processes for crash tests (test/fixtures/worker-child.ts): real processes, so tests can
 * send real signals (SIGKILL, SIGSTOP). Each child is killed after its test if it still runs.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { afterEach } from 'vitest';

const CHILD = new URL('../fixtures/worker-child.ts', import.meta.url).pathname;

/** What a worker child reports over IPC. */
export interface ChildMessage {
  ready?: boolean;
  started?: string;
  at?: number;
  attempt?: number;
  completed?: string;
  /** The processor returned (sent before the completion is written). */
  finished?: string;
  error?: string;
  message?: string;
}

/** Registers the cleanup and returns `start(url, queue, leaseMs, workerOptions?)`. */
export function useWorkerChildren() {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });
  return function startChild(url: string, queue: string, leaseMs: number, options?: object) {
    const args = [url, queue, String(leaseMs), ...(options ? [JSON.stringify(options)] : [])];
    const child = fork(CHILD, args, { execArgv: ['--import', 'tsx'], stdio: 'pipe' });
    children.push(child);
    const messages: ChildMessage[] = [];
    child.on('message', (m: ChildMessage) => messages.push(m));
    return { child, messages };
  };
}
