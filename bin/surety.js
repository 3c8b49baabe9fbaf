#!/usr/bin/env node
// Launcher of the `surety` command. In a source checkout (src/cli/main.ts exists) it registers tsx and
// runs the TypeScript source, so there is nothing to build; in an installed package it runs the
// compiled dist/cli/main.js. TypeScript processors (`surety worker job.ts`) then load through tsx too.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);

let entry = compiled;
if (existsSync(source)) {
  try {
    const { register } = await import('tsx/esm/api');
    register();
    globalThis[Symbol.for('surety.tsx')] = true;
    entry = source;
  } catch {
    // tsx is not installed: fall back to the compiled build below.
  }
}
if (entry === compiled && !existsSync(compiled)) {
  process.stderr.write('surety: no build found: run `npm run build`, or `npm install` to get tsx\n');
  process.exit(1);
}
await import(entry.href);
