/** `surety add <queue> <json>` and `surety add <queue> --file jobs.ndjson` (bulk import). */
import type { Command } from 'commander';
import type { JobOptions } from '../../types.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openQueue, openRedis } from '../connection.js';
import { UsageError } from '../errors.js';
import { formatDuration, parseDuration } from '../format.js';
import { importFile } from '../import.js';

interface AddOptions {
  file?: string;
  envelope?: boolean;
  delay?: string;
  at?: string;
  id?: string;
  priority?: number;
  maxAttempts?: number;
  lease?: string;
  lifo?: boolean;
}

export function parseJsonArg(text: string, what = 'job data'): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(
      `${what} is not valid JSON (${(err as Error).message}): ${JSON.stringify(text.slice(0, 60))}`,
    );
  }
}

/** Job options from the command line (shared by single adds and as defaults of every imported line). */
export function jobOptions(o: AddOptions): JobOptions {
  const opts: JobOptions = {};
  if (o.delay !== undefined && o.at !== undefined)
    throw new UsageError('use either --delay or --at, not both');
  if (o.delay !== undefined) opts.delayMs = parseDuration(o.delay, '--delay');
  if (o.at !== undefined) {
    const at = Date.parse(o.at);
    if (!Number.isFinite(at) || !/^\d{4}-\d\d-\d\d/.test(o.at))
      throw new UsageError(
        `--at must be an ISO date-time like 2030-01-01T09:00:00Z, got ${JSON.stringify(o.at)}`,
      );
    opts.runAt = at;
  }
  if (o.id !== undefined) opts.id = o.id;
  if (o.priority !== undefined) opts.priority = o.priority;
  if (o.maxAttempts !== undefined) opts.maxAttempts = o.maxAttempts;
  if (o.lease !== undefined) opts.leaseMs = parseDuration(o.lease, '--lease');
  if (o.lifo) opts.lifo = true;
  return opts;
}

export function registerAdd(program: Command): void {
  const cmd = program
    .command('add')
    .summary('add a job, or import an NDJSON file')
    .description('add a job (JSON data), or import many from an NDJSON file')
    .argument('<queue>', 'queue name')
    .argument('[json]', 'the job data, as JSON')
    .option('--file <path>', 'import one job per line from an NDJSON file ("-" reads stdin)')
    .option(
      '--envelope',
      'with --file: each line is {"data": ..., "opts": {"id", "delayMs", "priority", ...}}',
    )
    .option('--delay <duration>', 'run no earlier than this from now (500ms, 5s, 2m, 1h30m, 1d)')
    .option('--at <iso-time>', 'run no earlier than this time (ISO 8601)')
    .option('--id <id>', 'your job id: adding an id that exists enqueues nothing')
    .option(
      '--priority <n>',
      'lower runs first (-1000000..1000000)',
      intOption('--priority', -1_000_000, 1_000_000),
    )
    .option('--max-attempts <n>', 'attempts before the job goes dead', intOption('--max-attempts', 1, 1_000))
    .option('--lease <duration>', 'lease (visibility timeout) of each attempt')
    .option('--lifo', 'last in, first out: the job goes to the front of its priority')
    .action(async (queueName: string, json: string | undefined, o: AddOptions, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      if (o.file !== undefined && json !== undefined)
        throw new UsageError('give either <json> or --file, not both');
      if (o.file === undefined && json === undefined)
        throw new UsageError('missing job data: give <json> or --file <path>');
      if (o.file !== undefined && o.id !== undefined)
        throw new UsageError('--id applies to one job; with --file, use --envelope and put ids in the lines');
      if (o.envelope && o.file === undefined) throw new UsageError('--envelope applies to --file');
      const opts = jobOptions(o);
      if (o.file !== undefined) {
        const handle = await openRedis(g);
        const queue = openQueue(queueName, handle, g);
        const summary = await importFile(queue, o.file, {
          defaults: opts,
          envelope: o.envelope === true,
          json: g.json === true,
        });
        if (summary.rejected.length > 0) process.exitCode = 1;
        return;
      }
      const data = parseJsonArg(json!);
      const handle = await openRedis(g);
      const queue = openQueue(queueName, handle, g);
      const added = await queue.add(data, opts);
      if (g.json) return out.json({ queue: queueName, ...added });
      if (!added.isNew) {
        out.line(`job ${added.id} already exists in ${queueName} (${added.state}): nothing added`);
        return;
      }
      const due =
        added.state === 'delayed'
          ? `, due in ${formatDuration((opts.runAt !== undefined ? Number(opts.runAt) - Date.now() : opts.delayMs) ?? 0)}`
          : '';
      out.line(`added job ${out.paint('bold', added.id)} to ${queueName} (${added.state}${due})`);
    });
  examples(cmd, [
    `surety add emails '{"to":"ada@example.com"}'`,
    `surety add emails '{"to":"bob@example.com"}' --delay 5m --id welcome:bob`,
    `surety add reports '{"month":"2030-01"}' --at 2030-02-01T06:00:00Z --priority -10`,
    `surety add thumbnails '{"image":42}' --lifo      # newest first`,
    'surety add emails --file users.ndjson            # one JSON job data per line',
    'surety add emails --file jobs.ndjson --envelope  # lines like {"data":{...},"opts":{"id":"x"}}',
    'cat jobs.ndjson | surety add emails --file - --json',
  ]);
}
