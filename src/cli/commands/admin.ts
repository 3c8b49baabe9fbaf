/** `surety retry | clean | remove | pause | resume | promote | cancel | repartition`: changes made through the Queue admin API. */
import type { Command } from 'commander';
import { type BulkOutcome, changeEach, MAX_BULK_CHANGE } from '../../queue/bulk.js';
import type { CancelOutcome, FlowRef } from '../../queue/flow.js';
import type { Queue } from '../../queue/queue.js';
import { repartition } from '../../queue/repartition.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openQueue, openRedis } from '../connection.js';
import { UsageError } from '../errors.js';
import { formatCount, parseDuration } from '../format.js';
import { openKnownQueue } from '../known-queue.js';

type Outcome = Omit<BulkOutcome, 'more'> & { more?: boolean };

function report(verb: string, queue: string, r: Outcome, json: boolean | undefined): void {
  if (r.failed.length > 0) process.exitCode = 1;
  if (json) {
    // `more` only when set: --all-dead printed { queue, done, failed } before it had a bound.
    out.json({ queue, done: r.done, failed: r.failed, ...(r.more ? { more: true } : {}) });
    return;
  }
  const { paint } = out;
  if (r.done.length > 0)
    out.line(
      `${verb} ${formatCount(r.done.length)} job${r.done.length === 1 ? '' : 's'} in ${queue}: ${r.done.slice(0, 20).join(', ')}${r.done.length > 20 ? ', ...' : ''}`,
    );
  else if (r.failed.length === 0) out.line(`nothing to do in ${queue}`);
  if (r.more)
    out.note(
      `surety: more than ${formatCount(r.done.length + r.failed.length)} jobs: run it again for the rest`,
    );
  for (const f of r.failed)
    out.note(`surety: ${paint('red', f.id)}: ${f.code ? `${f.code}: ` : ''}${f.message}`);
}

export function registerAdmin(program: Command): void {
  const retry = program
    .command('retry')
    .summary('move dead jobs back to waiting')
    .description('move dead (or completed) jobs back to waiting with a fresh attempt budget')
    .argument('<queue>', 'queue name')
    .argument('[id...]', 'job ids')
    .option('--all-dead', 'retry every dead job of the queue')
    .action(async (queueName: string, ids: string[], o: { allDead?: boolean }, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      if (o.allDead && ids.length > 0) throw new UsageError('give job ids or --all-dead, not both');
      if (!o.allDead && ids.length === 0) throw new UsageError('missing job ids (or --all-dead)');
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      // --all-dead: the library's bulk retry, over a snapshot of the dead jobs (jobs that die again
      // while it runs are not retried in a loop).
      const outcome = o.allDead
        ? await queue.retryJobs({ state: 'dead', max: MAX_BULK_CHANGE })
        : await changeEach(ids, (id) => queue.retry(id));
      report('retried', queueName, outcome, g.json);
    });
  examples(retry, ['surety retry emails 42 43', 'surety retry emails --all-dead']);

  const clean = program
    .command('clean')
    .summary('delete old finished jobs')
    .description(
      'delete completed or dead jobs that finished more than --older-than ago (default: all of them)',
    )
    .argument('<queue>', 'queue name')
    .requiredOption('--state <state>', 'completed or dead')
    .option('--older-than <duration>', 'only jobs finished longer ago than this (e.g. 7d, 12h)', '0')
    .action(async (queueName: string, o: { state: string; olderThan: string }, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      if (o.state !== 'completed' && o.state !== 'dead') {
        throw new UsageError(`--state must be completed or dead, got ${JSON.stringify(o.state)}`);
      }
      const olderThanMs = parseDuration(o.olderThan, '--older-than');
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      const r = await queue.clean(o.state, { olderThanMs, limit: 1_000_000 });
      if (g.json) return out.json({ queue: queueName, state: o.state, ...r });
      out.line(`${queueName}: removed ${formatCount(r.removed)} ${o.state} job${r.removed === 1 ? '' : 's'}`);
    });
  examples(clean, [
    'surety clean emails --state dead --older-than 7d',
    'surety clean emails --state completed --json',
  ]);

  perJob(program, 'remove', 'delete jobs that are not active', 'removed', (q, id) => q.remove(id), [
    'surety remove emails 42',
    'surety remove emails 42 43 welcome:ada --json',
  ]);

  for (const paused of [true, false]) {
    const name = paused ? 'pause' : 'resume';
    const cmd = program
      .command(name)
      .description(
        paused
          ? 'stop every worker of a queue from claiming jobs (running ones finish)'
          : 'let workers claim jobs again',
      )
      .argument('<queue>', 'queue name');
    // A typo would pause a queue nobody uses; --create says the new name is meant (pausing a queue
    // before its first deploy, so its jobs wait until `surety resume`).
    if (paused) cmd.option('--create', 'pause a queue nothing has used yet (refused otherwise)');
    cmd.action(async (queueName: string, o: { create?: boolean }, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const handle = await openRedis(g);
      const queue = o.create ? openQueue(queueName, handle, g) : await openKnownQueue(queueName, handle, g);
      await (paused ? queue.pause() : queue.resume());
      if (g.json) return out.json({ queue: queueName, paused });
      out.line(`${queueName} ${paused ? out.paint('yellow', 'paused') : out.paint('green', 'resumed')}`);
    });
    examples(
      cmd,
      paused ? ['surety pause emails', 'surety pause new-queue --create'] : ['surety resume emails'],
    );
  }

  perJob(
    program,
    'promote',
    'make delayed jobs due now (they move to waiting and queue like a new job)',
    'promoted',
    (q, id) => q.promote(id),
    ['surety promote emails 42', 'surety promote reports nightly-2030-01 --json'],
  );

  const cancel = program
    .command('cancel')
    .description(
      'end unfinished jobs at once as dead (a running one is aborted by its worker); with --flow, also every job below each one (its dependents, transitively, across queues), children first (docs/workflows.md)',
    )
    .argument('<queue>', 'queue name')
    .argument('<id...>', 'job ids')
    .option('--flow', 'also cancel every unfinished job that depends on it, transitively, across queues')
    .option(
      '--max-nodes <n>',
      'with --flow: the most jobs to read below each job (1 to 10000)',
      intOption('--max-nodes', 1, 10_000),
    )
    .action(
      async (queueName: string, ids: string[], o: { flow?: boolean; maxNodes?: number }, c: Command) => {
        const g = globals(c);
        checkNames([queueName]);
        if (o.maxNodes !== undefined && !o.flow) throw new UsageError('--max-nodes goes with --flow');
        const queue = await openKnownQueue(queueName, await openRedis(g), g);
        if (!o.flow)
          return report('cancelled', queueName, await changeEach(ids, (id) => queue.cancel(id)), g.json);
        await cancelFlows(queue, queueName, ids, o.maxNodes, g.json);
      },
    );
  examples(cancel, [
    'surety cancel emails 42',
    'surety cancel reports nightly-2030-01 --json',
    'surety cancel etl extract-17 --flow',
  ]);

  const repartitionCmd = program
    .command('repartition')
    .summary("change a queue's partition count")
    .description(
      "change a queue's partition count, from 1 to N or from N to 1 (see docs/scaling.md): pauses the old partitions, waits for their active jobs, records the new count (clients on the old count are refused from then on: restart them with the new one), then moves every job and schedule. Safe to run again if cut off.",
    )
    .argument('<queue>', 'queue name')
    .requiredOption('--to <n>', 'the new partition count', intOption('--to', 1, 1024))
    .option('--wait <duration>', 'how long to wait for active jobs of the old partitions', '60s')
    .action(async (queueName: string, o: { to: number; wait: string }, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const waitMs = parseDuration(o.wait, '--wait');
      const handle = await openRedis(g);
      const r = await repartition(handle.client, queueName, {
        to: o.to,
        waitMs,
        ...(g.prefix ? { prefix: g.prefix } : {}),
        onProgress: (m) => {
          if (!g.json) out.note(`surety: ${m}`);
        },
      });
      if (g.json) return out.json({ queue: queueName, ...r });
      out.line(
        r.from === r.to
          ? `${queueName} already has ${r.to} partition(s): nothing to do`
          : `${queueName}: ${r.from} -> ${r.to} partition(s), ${formatCount(r.moved)} job(s) and ${r.schedules} schedule(s) moved`,
      );
    });
  examples(repartitionCmd, [
    'surety repartition emails --to 8',
    'surety repartition emails --to 1 --wait 5m',
  ]);
}

/** A command `<name> <queue> <id...>` that applies one Queue operation to each id and reports each. */
/** `cancel --flow`: each job's flow cancel in turn, reported per job (what was cancelled, what had ended). */
async function cancelFlows(
  queue: Queue,
  queueName: string,
  ids: string[],
  maxNodes: number | undefined,
  json: boolean | undefined,
): Promise<void> {
  const flows: ({ id: string } & CancelOutcome)[] = [];
  const failed: BulkOutcome['failed'] = [];
  for (const id of ids) {
    try {
      flows.push({ id, ...(await queue.cancel(id, { flow: true, ...(maxNodes ? { maxNodes } : {}) })) });
    } catch (err) {
      const e = err as { code?: string; message?: string };
      failed.push({ id, message: e.message ?? String(err), ...(e.code ? { code: e.code } : {}) });
    }
  }
  if (failed.length > 0) process.exitCode = 1;
  if (json) return out.json({ queue: queueName, flows, failed });
  const name = (r: FlowRef) => (r.queue === queueName ? r.id : `${r.id} [${r.queue}]`);
  const list = (refs: FlowRef[]) =>
    `${refs.slice(0, 20).map(name).join(', ')}${refs.length > 20 ? ', ...' : ''}`;
  for (const f of flows) {
    const n = f.cancelled.length;
    out.line(
      n > 0
        ? `cancelled ${formatCount(n)} job${n === 1 ? '' : 's'} of the flow below ${f.id} in ${queueName}: ${list(f.cancelled)}`
        : `nothing to cancel in the flow below ${f.id} in ${queueName}`,
    );
    if (f.ended.length > 0) out.line(out.paint('dim', `  already ended: ${list(f.ended)}`));
    if (f.truncated)
      out.note(
        `surety: the walk below ${f.id} stopped at --max-nodes; not read past ${list(f.cut)}: run it again (or raise --max-nodes)`,
      );
  }
  for (const f of failed)
    out.note(`surety: ${out.paint('red', f.id)}: ${f.code ? `${f.code}: ` : ''}${f.message}`);
}

function perJob(
  program: Command,
  name: string,
  description: string,
  done: string,
  op: (queue: Queue, id: string) => Promise<void>,
  lines: string[],
): void {
  const cmd = program
    .command(name)
    .description(description)
    .argument('<queue>', 'queue name')
    .argument('<id...>', 'job ids')
    .action(async (queueName: string, ids: string[], _o: unknown, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      report(done, queueName, await changeEach(ids, (id) => op(queue, id)), g.json);
    });
  examples(cmd, lines);
}
