/** `surety stats [queue...] [--watch]`: counts per queue and state, once or refreshed. */
import type { Command } from 'commander';
import type { Queue } from '../../queue/queue.js';
import { delay } from '../../timers.js';
import type { JobCounts } from '../../types.js';
import { examples, globals, out, queueLister } from '../command-kit.js';
import { checkNames, type GlobalOptions, openQueue, openRedis, type RedisHandle } from '../connection.js';
import { formatCount, parseDuration, table } from '../format.js';
import { openKnownQueue } from '../known-queue.js';
import { nextInterrupt } from '../lifecycle.js';

export interface QueueStats extends JobCounts {
  queue: string;
  paused: boolean;
  workers: number;
}

/** Counts of each queue, through the Queue admin API. */
export async function collectStats(
  list: string[],
  handle: RedisHandle,
  g: GlobalOptions,
  cache: Map<string, Queue>,
) {
  return Promise.all(
    list.map(async (name): Promise<QueueStats> => {
      let q = cache.get(name);
      if (!q) {
        q = openQueue(name, handle, g);
        cache.set(name, q);
      }
      const [counts, paused, workers] = await Promise.all([q.counts(), q.isPaused(), q.workers()]);
      return { queue: name, ...counts, paused, workers: workers.length };
    }),
  );
}

export function statsTable(rows: QueueStats[]): string {
  const { paint } = out;
  const num = (n: number, style?: 'red' | 'yellow') =>
    n > 0 && style ? { text: formatCount(n), style } : formatCount(n);
  return table(
    ['QUEUE', 'WAITING', 'DELAYED', 'BLOCKED', 'ACTIVE', 'COMPLETED', 'DEAD', 'WORKERS', 'STATUS'],
    rows.map((r) => [
      r.queue,
      num(r.waiting),
      num(r.delayed),
      num(r.blocked),
      num(r.active),
      num(r.completed),
      num(r.dead, 'red'),
      num(r.workers),
      r.paused ? { text: 'paused', style: 'yellow' } : 'running',
    ]),
    { right: [1, 2, 3, 4, 5, 6, 7], flex: [0], paint },
  );
}

export function registerStats(program: Command): void {
  const cmd = program
    .command('stats')
    .summary('jobs per queue and state')
    .description('jobs per queue and state (every queue under the prefix when none is named)')
    .argument('[queue...]', 'queue names')
    .option('-w, --watch', 'refresh until Ctrl-C')
    .option('--interval <duration>', 'refresh period with --watch', '2s')
    .action(async (names: string[], o: { watch?: boolean; interval: string }, c: Command) => {
      const g = globals(c);
      checkNames(names);
      const intervalMs = Math.max(100, parseDuration(o.interval, '--interval'));
      const handle = await openRedis(g);
      const cache = new Map<string, Queue>();
      // Named queues must exist (a typo would show a row of zeros); they are cached for the renders.
      for (const name of names) cache.set(name, await openKnownQueue(name, handle, g));
      const list = queueLister(names, handle, g);
      const render = async () => {
        const rows = await collectStats(await list(), handle, g, cache);
        if (g.json) {
          if (o.watch) out.jsonLine({ at: new Date().toISOString(), queues: rows });
          else out.json(rows);
          return;
        }
        if (o.watch && process.stdout.isTTY) process.stdout.write('\x1b[H\x1b[2J');
        if (o.watch)
          out.line(
            out.paint(
              'dim',
              `${new Date().toLocaleTimeString('en-GB')}  every ${o.interval}, Ctrl-C to stop`,
            ),
          );
        out.line(rows.length > 0 ? statsTable(rows) : 'no queues found');
        if (o.watch) {
          // The last full minute of queue.metrics() (Redis-side per-minute counters).
          const lines = await Promise.all(
            rows.map(async (r) => {
              const m = await (cache.get(r.queue) as Queue).metrics({ windowMs: 120_000 });
              const b = m.buckets[0]!;
              return `${r.queue}: ${formatCount(b.completed)} completed, ${formatCount(b.failed)} failed attempts, ${formatCount(b.dead)} dead`;
            }),
          );
          out.line(out.paint('dim', `last full minute: ${lines.join('; ') || '-'}`));
        }
      };
      await render();
      if (!o.watch) return;
      const { signal, release } = nextInterrupt();
      let stop = false;
      signal.then(() => {
        stop = true;
      });
      try {
        while (!stop) {
          const wait = delay(intervalMs);
          await Promise.race([wait, signal]);
          if (!stop) await render();
        }
      } finally {
        release();
      }
    });
  examples(cmd, ['surety stats', 'surety stats emails reports --json', 'surety stats --watch --interval 1s']);
}
