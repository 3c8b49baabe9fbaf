/**
 * The `surety` command line: a thin client of the Queue admin API (it never reads Redis keys itself).
 * Run it as `npx surety ...` (bin/surety.js), or from a checkout as `node --import tsx src/cli/main.ts`.
 * Exit codes: 0 ok, 1 failure, 2 usage error (bad arguments or input refused by validation).
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerAdd } from './commands/add.js';
import { registerAdmin } from './commands/admin.js';
import { registerBatch } from './commands/batch.js';
import { registerDashboard } from './commands/dashboard.js';
import { registerDemo } from './commands/demo.js';
import { registerEdits } from './commands/edits.js';
import { registerExplain } from './commands/explain.js';
import { registerFlow } from './commands/flow.js';
import { registerGroups } from './commands/groups.js';
import { registerImportBullmq } from './commands/import-bullmq.js';
import { registerJobs } from './commands/jobs.js';
import { registerReaper } from './commands/reaper.js';
import { registerRelay } from './commands/relay.js';
import { registerSchedules } from './commands/schedules.js';
import { registerScripts } from './commands/scripts.js';
import { registerSignal } from './commands/signal.js';
import { registerStats } from './commands/stats.js';
import { registerWorker } from './commands/worker.js';
import { registerWorkers } from './commands/workers.js';
import { EXIT_OK, reportError } from './errors.js';
import { flushOutput, installPipeHandlers, installSignalHandlers, runCleanups } from './lifecycle.js';

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export function buildProgram(): Command {
  const program = new Command('surety')
    .description('Surety: a durable Redis job queue. Inspect and operate queues, run workers, try the demo.')
    .version(version(), '-V, --version')
    .option(
      '--redis <url>',
      'Redis URL, or "embedded": use $REDIS_URL / the default if reachable, else start a private redis-server (default: $REDIS_URL or redis://127.0.0.1:6379)',
    )
    .option('--prefix <prefix>', 'key prefix of the queues', 'surety')
    .option('--json', 'machine-readable output (JSON, or JSON lines for streams)')
    .exitOverride()
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ outputError: (str, write) => write(`surety: ${str.replace(/^error: /, '')}`) })
    .configureHelp({ showGlobalOptions: true });
  registerStats(program);
  registerWorkers(program);
  registerJobs(program);
  registerExplain(program);
  registerFlow(program);
  registerBatch(program);
  registerGroups(program);
  registerAdd(program);
  registerAdmin(program);
  registerEdits(program);
  registerSignal(program);
  registerSchedules(program);
  registerWorker(program);
  registerReaper(program);
  registerRelay(program);
  registerScripts(program);
  registerImportBullmq(program);
  registerDashboard(program);
  registerDemo(program);
  program.addHelpText(
    'after',
    `
Examples:
  $ surety demo                                  # the product in 30 seconds (starts its own Redis if needed)
  $ surety add emails '{"to":"ada@example.com"}' --delay 5s
  $ surety worker ./email-processor.js --queue emails --concurrency 10
  $ surety stats --watch
  $ surety jobs emails --state dead && surety retry emails --all-dead
  $ surety explain emails 42                     # why isn't job 42 running?
  $ surety flow etl load-7                       # the jobs it waits for and those waiting for it
  $ surety groups emails && surety group-limits emails --group tenant-42 --concurrency 1
  $ REDIS_URL=redis://10.0.0.5:6379 surety queues --json

Exit codes: 0 ok, 1 failure, 2 usage error. Set DEBUG=surety for stack traces.
`,
  );
  return program;
}

export async function main(argv: string[] = process.argv): Promise<number> {
  installSignalHandlers();
  installPipeHandlers();
  let code = EXIT_OK;
  try {
    await buildProgram().parseAsync(argv);
    code = typeof process.exitCode === 'number' ? process.exitCode : EXIT_OK;
  } catch (err) {
    code = reportError(err);
  }
  await runCleanups();
  await flushOutput();
  return code;
}

process.exit(await main());
