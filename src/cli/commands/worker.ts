/**
 * `surety worker <module>`: runs the module's processor on a queue until SIGTERM/SIGINT, then closes
 * gracefully: stops claiming, lets running jobs finish within --grace, writes their outcomes. A second
 * signal stops at once (unfinished jobs are recovered by other workers when their leases expire).
 */
import type { Command } from 'commander';
import type { SuretyError } from '../../errors.js';
import type { Job } from '../../worker/job.js';
import { Worker } from '../../worker/worker.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openRedis, redact } from '../connection.js';
import { UsageError } from '../errors.js';
import { formatDuration, parseDuration } from '../format.js';
import { nextInterrupt } from '../lifecycle.js';
import { loadProcessor } from '../load-processor.js';

interface WorkerCliOptions {
  queue?: string;
  concurrency: number;
  grace: string;
  partitions: string;
}

/** One line per finished job: human text, or a JSON line with --json. */
function jobPrinter(queue: string, json: boolean) {
  const { paint } = out;
  const time = () => new Date().toLocaleTimeString('en-GB');
  return (event: 'completed' | 'failed', job: Job, ms: number, err?: Error, outcome?: string) => {
    if (json) {
      const error = err
        ? { name: err.name, message: err.message, code: (err as { code?: unknown }).code }
        : undefined;
      out.jsonLine({
        event,
        queue,
        id: job.id,
        attempt: job.attempt,
        durationMs: Math.round(ms),
        outcome,
        error,
        at: new Date().toISOString(),
      });
      return;
    }
    const head = `${paint('dim', time())}  `;
    const tail = `${paint('dim', `attempt ${job.attempt}  ${formatDuration(ms)}`)}`;
    if (event === 'completed') out.line(`${head}${paint('green', '✓ completed')}  ${job.id}  ${tail}`);
    else {
      const what =
        outcome === 'dead'
          ? paint('red', '✗ dead     ')
          : paint('yellow', `↻ ${outcome === 'delayed' ? 'retry later' : 'retry now  '}`);
      out.line(`${head}${what}  ${job.id}  ${tail}  ${err?.name}: ${err?.message}`);
    }
  };
}

export function registerWorker(program: Command): void {
  const cmd = program
    .command('worker')
    .summary("run a module's processor until SIGTERM/SIGINT")
    .description(
      "run a module's processor on a queue until SIGTERM/SIGINT, then finish running jobs and stop",
    )
    .argument('<module>', 'JS/TS file whose default export (or named export `process`) is the processor')
    .option('-q, --queue <name>', "queue to work (default: the module's exported `queue`)")
    .option('-c, --concurrency <n>', 'jobs run at once', intOption('--concurrency', 1, 10_000), 1)
    .option('--grace <duration>', 'on SIGTERM/SIGINT, how long running jobs may take to finish', '30s')
    .option(
      '--partitions <n>',
      "partitions of the queue, or 'auto' for the count recorded in Redis (see docs/scaling.md)",
      'auto',
    )
    .action(async (spec: string, o: WorkerCliOptions, c: Command) => {
      const g = globals(c);
      const json = g.json === true;
      const graceMs = parseDuration(o.grace, '--grace');
      if (o.queue !== undefined) checkNames([o.queue]);
      const loaded = await loadProcessor(spec);
      const queue = o.queue ?? loaded.queue;
      if (!queue)
        throw new UsageError(`no queue: pass --queue <name>, or export const queue = '<name>' from ${spec}`);
      checkNames([queue]);
      const handle = await openRedis(g);
      const starts = new Map<string, number>();
      const key = (job: Job) => `${job.id}\n${job.attempt}`;
      const took = (job: Job) => {
        const t = starts.get(key(job));
        starts.delete(key(job));
        return t === undefined ? 0 : performance.now() - t;
      };
      const worker = new Worker<unknown, unknown>(
        queue,
        (job) => {
          starts.set(key(job), performance.now());
          return loaded.processor(job);
        },
        {
          connection: handle.url,
          concurrency: o.concurrency,
          partitions: o.partitions === 'auto' ? 'auto' : intOption('--partitions', 1, 1024)(o.partitions),
          closeTimeoutMs: graceMs,
          autostart: false,
          ...(g.prefix ? { prefix: g.prefix } : {}),
          logger: { warn: (m) => out.note(m) },
        },
      );
      const print = jobPrinter(queue, json);
      worker.on('completed', (job) => print('completed', job, took(job)));
      worker.on('failed', (job, err, outcome) => print('failed', job, took(job), err, outcome));
      worker.on('leaseLost', (ids) =>
        json
          ? out.jsonLine({ event: 'leaseLost', queue, ids })
          : out.note(`surety: lease lost (the jobs may run elsewhere): ${ids.join(', ')}`),
      );
      worker.on('recovered', (r) =>
        json
          ? out.jsonLine({ event: 'recovered', queue, ...r })
          : out.note(
              `surety: recovered jobs of a dead worker: requeued ${r.requeued.join(', ') || '-'}; dead ${r.dead.join(', ') || '-'}`,
            ),
      );
      worker.on('error', (err: SuretyError) =>
        json
          ? out.jsonLine({ event: 'error', queue, code: err.code, message: err.message })
          : out.note(`surety: ${err.code}: ${err.message}`),
      );
      const { signal, release } = nextInterrupt();
      try {
        await worker.start();
        if (json)
          out.jsonLine({
            event: 'ready',
            queue,
            workerId: worker.id,
            pid: process.pid,
            concurrency: o.concurrency,
          });
        else
          out.note(
            `surety: worker ${worker.id} on ${queue} (${redact(handle.url)}), concurrency ${o.concurrency}; Ctrl-C to stop`,
          );
        const sig = await signal;
        const running = worker.activeCount;
        if (json) out.jsonLine({ event: 'closing', queue, signal: sig, running, graceMs });
        else
          out.note(
            `surety: ${sig}: finishing ${running} running job${running === 1 ? '' : 's'} (up to ${formatDuration(graceMs)}; again to stop now)`,
          );
      } finally {
        release();
        await worker.close({ timeoutMs: graceMs });
      }
      if (json) out.jsonLine({ event: 'closed', queue });
      else out.note('surety: worker stopped');
    });
  examples(cmd, [
    'surety worker ./processors/email.js --queue emails --concurrency 10',
    'surety worker ./src/jobs/report.ts -q reports --grace 2m   # TypeScript runs through tsx',
    'surety worker ./email.js -q emails --json | jq -c "select(.event == \\"failed\\")"',
  ]);
}
