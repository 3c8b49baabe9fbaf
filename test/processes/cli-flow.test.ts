/**
 * `surety flow` and `surety cancel --flow`, run as a real binary in child processes against this
 * file's private redis-server (the run's compiled build, test/helpers/cli-build.ts); and the tree
 * printer on a flow made by hand.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { flowTree } from '../../src/cli/commands/flow.js';
import { type Flow, Queue } from '../../src/index.js';
import { BUILD_TIMEOUT_MS, type CliRun, compiledCli, runCompiledCli } from '../helpers/cli-build.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
let compiled = '';
beforeAll(async () => {
  compiled = await compiledCli();
}, BUILD_TIMEOUT_MS);

function surety(...args: string[]): Promise<CliRun> {
  return runCompiledCli(compiled, fx.url, args);
}
function queue(label: string): Queue {
  const q = new Queue(uniqueName(label), { connection: fx.url });
  open.push(q);
  return q;
}
const plain = Object.assign((_style: unknown, text: string) => text, { enabled: false });

describe('flowTree', () => {
  it('prints a diamond as a tree: the join once, then "(see above)"; other queues in brackets; the cut', () => {
    const r = (id: string, queue = 'q') => ({ queue, id });
    const flow: Flow = {
      root: r('b'),
      nodes: [
        { ...r('b'), name: 'resize', state: 'blocked', parents: [r('a')], children: [r('d')] },
        { ...r('a'), name: null, state: 'completed', parents: [], children: [r('b'), r('c', 'other')] },
        { ...r('d'), name: null, state: 'blocked', parents: [r('b'), r('c', 'other')], children: [r('e')] },
        { ...r('c', 'other'), name: null, state: 'active', parents: [r('a')], children: [r('d')] },
      ],
      truncated: true,
      cut: [r('d')],
    };
    expect(flowTree(flow, plain)).toEqual([
      'a  completed',
      '├─ b  blocked  resize  <- root',
      '│  └─ d  blocked',
      '│     └─ ... cut: 1 linked job not read (--max-nodes)',
      '└─ c [other]  active',
      '   └─ d (see above)',
    ]);
  });
});

describe('surety flow', () => {
  it('prints the flow across two queues with each state; --json is queue.flow; an unknown id exits 1', async () => {
    const a = queue('cfa');
    const b = queue('cfb');
    await a.add({}, { id: 'extract', name: 'extract' });
    await b.add({}, { id: 'load', dependsOn: [{ queue: a.name, id: 'extract' }] });
    await a.add({}, { id: 'report', dependsOn: [{ queue: b.name, id: 'load' }, 'extract'] });
    const [tree, json, missing] = await Promise.all([
      surety('flow', a.name, 'report'),
      surety('flow', a.name, 'report', '--json'),
      surety('flow', a.name, 'nope'),
    ]);
    expect(tree.code).toBe(0);
    expect(tree.stdout).toBe(
      [
        `flow of job report in ${a.name}: 3 jobs`,
        'extract  waiting  extract',
        '├─ report  blocked  <- root',
        `└─ load [${b.name}]  blocked`,
        '   └─ report (see above)',
        '',
      ].join('\n'),
    );
    expect(JSON.parse(json.stdout)).toEqual(await a.flow('report'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^surety: .*ERR_JOB_NOT_FOUND|^surety: .*does not exist/);
  });

  it('--max-nodes cuts the walk and says so; a value past 10000 is a usage error', async () => {
    const q = queue('cfcut');
    await q.add({}, { id: 'root' });
    for (let i = 0; i < 4; i++) await q.add({}, { id: `c${i}`, dependsOn: ['root'] });
    const cut = await surety('flow', q.name, 'root', '--max-nodes', '3');
    expect(cut.code).toBe(0);
    expect(cut.stdout.split('\n')[0]).toBe(`flow of job root in ${q.name}: 3 jobs, cut at 3`);
    expect(cut.stdout).toContain('└─ ... cut: 2 linked jobs not read (--max-nodes)');
    const all = await surety('flow', q.name, 'root', '--max-nodes', '10000');
    expect(all.stdout.split('\n')[0]).toBe(`flow of job root in ${q.name}: 5 jobs`);
    const bad = await surety('flow', q.name, 'root', '--max-nodes', '10001');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--max-nodes must be an integer from 1 to 10000/);
  });
});

describe('surety cancel --flow', () => {
  it('cancels a job and the jobs below it across queues, and lists them; --json has the outcome', async () => {
    const a = queue('cca');
    const b = queue('ccb');
    await a.add({}, { id: 'root' });
    await b.add({}, { id: 'mid', dependsOn: [{ queue: a.name, id: 'root' }] });
    await a.add({}, { id: 'other' });
    const r = await surety('cancel', a.name, 'root', '--flow');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`cancelled 2 jobs of the flow below root in ${a.name}: mid [${b.name}], root\n`);
    expect((await b.getJob('mid'))!.state).toBe('dead');
    expect((await a.getJob('other'))!.state).toBe('waiting');
    const again = await surety('cancel', a.name, 'root', '--flow', '--json');
    expect(JSON.parse(again.stdout)).toEqual({
      queue: a.name,
      flows: [
        {
          id: 'root',
          cancelled: [],
          // Below an ended job nothing names its children any more (docs/workflows.md).
          ended: [{ queue: a.name, id: 'root' }],
          truncated: false,
          cut: [],
        },
      ],
      failed: [],
    });
    const usage = await surety('cancel', a.name, 'other', '--max-nodes', '5');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--max-nodes goes with --flow/);
  });
});
