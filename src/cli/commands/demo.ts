/** `surety demo` and the hidden `_demo-worker` command its worker processes run. */
import type { Command } from 'commander';
import { examples, globals } from '../command-kit.js';
import { runDemoChild } from '../demo/child.js';
import { runDemo } from '../demo/run.js';

export function registerDemo(program: Command): void {
  const cmd = program
    .command('demo')
    .summary('the product in ~15 s (starts a private redis-server if no Redis is reachable)')
    .description(
      'see Surety in ~15 s: two worker processes, delayed, retried and dead jobs, and a worker killed with SIGKILL mid-job whose job is recovered (starts a private redis-server when no Redis is reachable)',
    )
    .action(async (_o: unknown, c: Command) => runDemo(globals(c)));
  examples(cmd, ['surety demo', 'surety demo --redis redis://127.0.0.1:6380', 'surety demo --json']);

  program
    .command('_demo-worker', { hidden: true })
    .argument('<url>')
    .argument('<queue>')
    .action(async (url: string, queue: string, _o: unknown, c: Command) =>
      runDemoChild(url, queue, globals(c).prefix),
    );
}
