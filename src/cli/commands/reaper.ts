/** `surety reaper [--queue q...]`: a standalone daemon that only recovers expired leases. */
import type { Command } from 'commander';
import { collect, examples, globals, out, queueLister } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { formatDuration, parseDuration } from '../format.js';
import { nextInterrupt } from '../lifecycle.js';
import { Reaper, type RecoveredJobs } from '../reaper.js';

export function registerReaper(program: Command): void {
  const cmd = program
    .command('reaper')
    .summary('recover expired leases of crashed workers (a daemon)')
    .description(
      'recover expired leases (jobs of crashed workers) until Ctrl-C; every worker does this too, the reaper covers queues whose workers are all gone',
    )
    .option(
      '-q, --queue <name>',
      'queue to watch (repeatable; default: every queue, rediscovered each pass)',
      collect,
      [],
    )
    .option('--interval <duration>', 'time between passes', '5s')
    .option('--once', 'run one pass and exit')
    .action(async (o: { queue: string[]; interval: string; once?: boolean }, c: Command) => {
      const g = globals(c);
      checkNames(o.queue);
      const intervalMs = Math.max(10, parseDuration(o.interval, '--interval'));
      const handle = await openRedis(g);
      const queues = queueLister(o.queue, handle, g);
      const reaper = new Reaper(handle.client, {
        queues,
        intervalMs,
        ...(g.prefix ? { prefix: g.prefix } : {}),
      });
      const show = (r: RecoveredJobs) => {
        if (g.json) return out.jsonLine({ event: 'recovered', ...r, at: new Date().toISOString() });
        const parts = [];
        if (r.requeued.length > 0) parts.push(`requeued ${r.requeued.join(', ')}`);
        if (r.dead.length > 0) parts.push(out.paint('red', `dead (attempts spent) ${r.dead.join(', ')}`));
        out.line(
          `${out.paint('dim', new Date().toLocaleTimeString('en-GB'))}  ${r.queue}: ${parts.join('; ')}`,
        );
      };
      reaper.on('error', (err) =>
        g.json
          ? out.jsonLine({ event: 'error', code: err.code, message: err.message })
          : out.note(`surety: ${err.code}: ${err.message}`),
      );
      if (o.once) {
        const found = await reaper.pass();
        if (g.json) return out.json(found);
        for (const r of found) show(r);
        if (found.length === 0) out.line('no expired leases');
        return;
      }
      reaper.on('recovered', show);
      const { signal, release } = nextInterrupt();
      reaper.start();
      const what = o.queue.length > 0 ? o.queue.join(', ') : 'every queue';
      if (g.json) out.jsonLine({ event: 'ready', queues: o.queue, intervalMs, pid: process.pid });
      else out.note(`surety: reaper watching ${what} every ${formatDuration(intervalMs)}; Ctrl-C to stop`);
      await signal;
      release();
      reaper.stop();
    });
  examples(cmd, [
    'surety reaper',
    'surety reaper -q emails -q reports --interval 2s',
    'surety reaper --once --json',
  ]);
}
