/** `surety flow <queue> <id>`: the dependency graph around a job as a tree, through `queue.flow(id)`. */
import type { Command } from 'commander';
import type { Flow, FlowNode, FlowRef } from '../../queue/flow.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import type { Painter } from '../format.js';
import { openKnownQueue } from '../known-queue.js';
import { STATE_STYLE } from './jobs.js';

/** The largest --max-nodes (the library's MAX_FLOW_NODES; it checks the value too). */
const MAX_NODES = 10_000;

const keyOf = (r: FlowRef) => `${r.queue}\n${r.id}`;

/**
 * The flow as indented lines: from each job with no parent among the nodes (the tops), down through
 * the children. A job reached a second time (a diamond's join) is printed once, later references
 * say `(see above)`; a node where the walk was cut says how many of its neighbours were not read.
 * Jobs of other queues than the root's carry their queue in brackets.
 */
export function flowTree(flow: Flow, paint: Painter): string[] {
  const byKey = new Map(flow.nodes.map((n) => [keyOf(n), n]));
  const cut = new Set(flow.cut.map(keyOf));
  const rootKey = keyOf(flow.root);
  const label = (n: FlowRef) => (n.queue === flow.root.queue ? n.id : `${n.id} [${n.queue}]`);
  const lines: string[] = [];
  const printed = new Set<string>();
  const draw = (n: FlowNode, lead: string, branch: string) => {
    const key = keyOf(n);
    if (printed.has(key)) {
      lines.push(`${lead}${branch}${label(n)} ${paint('dim', '(see above)')}`);
      return;
    }
    printed.add(key);
    const state = n.state === 'missing' ? paint('red', 'missing') : paint(STATE_STYLE[n.state], n.state);
    const name = n.name === null ? '' : `  ${paint('dim', n.name)}`;
    const root = key === rootKey ? `  ${paint('bold', '<- root')}` : '';
    lines.push(`${lead}${branch}${paint('bold', label(n))}  ${state}${name}${root}`);
    const below = lead + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ');
    const children = n.children.filter((c) => byKey.has(keyOf(c)));
    const unread = [...n.parents, ...n.children].filter((r) => !byKey.has(keyOf(r))).length;
    const rows = children.length + (cut.has(key) ? 1 : 0);
    children.forEach((c, i) => {
      draw(byKey.get(keyOf(c))!, below, i === rows - 1 ? '└─ ' : '├─ ');
    });
    if (cut.has(key))
      lines.push(
        `${below}└─ ${paint('yellow', `... cut: ${unread} linked job${unread === 1 ? '' : 's'} not read (--max-nodes)`)}`,
      );
  };
  const tops = flow.nodes.filter((n) => !n.parents.some((p) => byKey.has(keyOf(p))));
  for (const top of tops) draw(top, '', '');
  // A cycle has no top (ids reused could fake one): what was not reached is drawn from itself.
  for (const n of flow.nodes) if (!printed.has(keyOf(n))) draw(n, '', '');
  return lines;
}

export function registerFlow(program: Command): void {
  const flow = program
    .command('flow')
    .summary('the dependency graph around a job, across queues')
    .description(
      'the flow around a job: its parents and the jobs that depend on it (dependsOn), transitively, across queues of the prefix, as a tree with each job\'s state. A job reached twice is printed once and later marked "(see above)"; where --max-nodes stopped the walk, "... cut". The children of a finished job are seen only from their side (docs/workflows.md).',
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .option(
      '--max-nodes <n>',
      `the most jobs to read (1 to ${MAX_NODES})`,
      intOption('--max-nodes', 1, MAX_NODES),
      500,
    )
    .action(async (queueName: string, id: string, o: { maxNodes: number }, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      // An unknown id is the library's JobNotFoundError: one line, exit code 1, as `surety job`.
      const f = await queue.flow(id, { maxNodes: o.maxNodes });
      if (g.json) return out.json(f);
      const { paint } = out;
      out.line(
        `${paint('bold', `flow of job ${id}`)} in ${queueName}: ${f.nodes.length} job${f.nodes.length === 1 ? '' : 's'}${f.truncated ? paint('yellow', `, cut at ${o.maxNodes}`) : ''}`,
      );
      for (const line of flowTree(f, paint)) out.line(line);
    });
  examples(flow, [
    'surety flow etl load-2031-01-07',
    'surety flow etl load-2031-01-07 --max-nodes 2000',
    'surety flow etl load-2031-01-07 --json | jq ".nodes[] | select(.state == \\"dead\\")"',
  ]);
}
