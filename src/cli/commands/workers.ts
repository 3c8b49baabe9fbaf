/** `surety workers [queue...]` (live workers) and `surety queues` (queue discovery). */
import type { Command } from 'commander';
import { discoverQueues } from '../../queue/discover.js';
import type { WorkerDescription } from '../../types.js';
import { examples, globals, out } from '../command-kit.js';
import { openRedis } from '../connection.js';
import { formatWhen, table } from '../format.js';
import { rowsOfQueues } from '../known-queue.js';

export function registerWorkers(program: Command): void {
  const workers = program
    .command('workers')
    .summary('live workers')
    .description('workers whose heartbeat is live (of every queue when none is named)')
    .argument('[queue...]', 'queue names')
    .action(async (names: string[], _o: unknown, c: Command) => {
      const g = globals(c);
      const rows = await rowsOfQueues<WorkerDescription>(names, g, (q) => q.workers());
      if (g.json) return out.json(rows);
      if (rows.length === 0)
        return out.line(`no live workers${names.length > 0 ? ` for ${names.join(', ')}` : ''}`);
      const now = Date.now();
      out.line(
        table(
          ['QUEUE', 'WORKER', 'HOST', 'PID', 'RUNNING', 'STARTED', 'LAST BEAT', 'ACTIVE JOBS'],
          rows.map((w) => [
            w.queue,
            w.id,
            w.host,
            w.pid,
            `${w.activeJobIds.length}/${w.concurrency}`,
            formatWhen(w.startedAt, now),
            formatWhen(w.lastBeat, now),
            w.activeJobIds.join(' '),
          ]),
          { right: [3, 4], flex: [1, 2, 7], paint: out.paint },
        ),
      );
    });
  examples(workers, ['surety workers emails', 'surety workers --json']);

  const queues = program
    .command('queues')
    .summary('discover queues')
    .description('discover the queues under the prefix (a SCAN: cheap, never blocks Redis)')
    .action(async (_o: unknown, c: Command) => {
      const g = globals(c);
      const handle = await openRedis(g);
      const names = await discoverQueues(handle.client, g.prefix);
      if (g.json) return out.json(names);
      if (names.length === 0) return out.line(`no queues under prefix ${g.prefix ?? 'surety'}`);
      for (const n of names) out.line(n);
    });
  examples(queues, ['surety queues', 'surety queues --prefix myapp --json']);
}
