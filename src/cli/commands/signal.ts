/**
 * `surety signal <queue> <id> <name> [json]`: queue.signal from a shell (docs/workflows.md#signals).
 * A signal the job cannot take (it has ended, or does not exist) exits 1 with the reason, so a script
 * that sends an approval learns that nobody will read it.
 */
import type { Command } from 'commander';
import { examples, globals, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { CliError } from '../errors.js';
import { openKnownQueue } from '../known-queue.js';
import { parseJsonArg } from './add.js';

const WHY = {
  ended: 'the job has ended',
  missing: 'no such job',
  full: 'the job keeps 1 000 signals no wait has taken',
} as const;

export function registerSignal(program: Command): void {
  const cmd = program
    .command('signal')
    .description(
      "send a signal to a job, for its processor's job.waitForSignal(name); a job parked waiting for it runs again",
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .argument('<name>', 'signal name')
    .argument('[json]', 'the payload, as JSON (none: undefined)')
    .action(async (queueName: string, id: string, name: string, json: string | undefined, _o, c: Command) => {
      const payload = json === undefined ? undefined : parseJsonArg(json);
      const g = globals(c);
      checkNames([queueName]);
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      const r = await queue.signal(id, name, payload);
      if (g.json === true) out.json({ queue: queueName, id, name, ...r });
      else if (r.delivered)
        out.line(
          `${queueName}: job ${id} ${r.woke ? 'woke with' : 'keeps'} signal ${name}${r.woke ? '' : ` (${r.state})`}`,
        );
      if (!r.delivered)
        throw new CliError(
          `${queueName}: signal ${name} not delivered to job ${id}: ${WHY[r.reason!]} (${r.state})`,
        );
    });
  examples(cmd, [
    `surety signal orders order-42 delivered '{"at":"2026-11-28T10:00:00Z"}'`,
    'surety signal approvals 17 approved --json',
  ]);
}
