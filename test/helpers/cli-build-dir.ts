/**
 * vitest globalSetup: one temporary directory per run for the compiled CLI (test/helpers/cli-build.ts
 * builds into it the first time a test file asks), removed when the run ends, so no build is left in
 * the checkout or in /tmp. Only the directory is made here: a run without CLI tests builds nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    cliBuildDir: string;
  }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'surety-cli-build-'));
  project.provide('cliBuildDir', dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
