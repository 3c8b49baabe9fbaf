/** `surety explain <queue> <id>`: why a job is not running, through `queue.explain(id)`. */
import type { Command } from 'commander';
import type { ExplainReason, Explanation } from '../../queue/explain.js';
import { examples, globals, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { formatTime, formatWhen } from '../format.js';
import { openKnownQueue } from '../known-queue.js';
import { STATE_STYLE } from './jobs.js';

/**
 * The data fields of a reason beside its code and message, in words: `until` as an ISO time and
 * relative ("in 3s"), as `surety job` shows times. Rendered generically, so reason codes and fields
 * the library adds later show up without a change here.
 */
export function reasonDetails(r: ExplainReason, now = Date.now()): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(r)) {
    if (key === 'code' || key === 'message' || value === undefined) continue;
    if (key === 'until' && typeof value === 'number')
      parts.push(`until ${formatTime(value)} (${formatWhen(value, now)})`);
    else if (Array.isArray(value)) parts.push(`${key} ${value.join(', ')}`);
    else if (typeof value === 'object' && value !== null) parts.push(`${key} ${JSON.stringify(value)}`);
    else parts.push(`${key} ${String(value)}`);
  }
  return parts.join('; ');
}

function showExplanation(queue: string, e: Explanation): void {
  const { paint } = out;
  out.line(`${paint('bold', `job ${e.id}`)} in ${queue}: ${paint(STATE_STYLE[e.state], e.state)}`);
  if (e.reasons.length === 0) {
    out.line(paint('dim', '  no reason reported'));
    return;
  }
  const width = Math.max(...e.reasons.map((r) => r.code.length));
  const now = Date.now();
  for (const r of e.reasons) {
    const details = reasonDetails(r, now);
    out.line(
      `  ${paint('yellow', r.code.padEnd(width))}  ${r.message}${details ? paint('dim', `  [${details}]`) : ''}`,
    );
  }
}

export function registerExplain(program: Command): void {
  const explain = program
    .command('explain')
    .summary("why a job isn't running")
    .description(
      'why a job is where it is: queued behind others, delayed, blocked on parents, paused, limited, no workers...',
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .action(async (queueName: string, id: string, _o: unknown, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      // An unknown id is the library's JobNotFoundError: one line, exit code 1, as `surety job`.
      const explanation = await queue.explain(id);
      if (g.json) return out.json({ queue: queueName, ...explanation });
      showExplanation(queueName, explanation);
    });
  examples(explain, [
    'surety explain emails 42',
    'surety explain emails welcome:ada --json | jq ".reasons[].code"',
  ]);
}
