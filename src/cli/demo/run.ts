/**
 * `surety demo`: the product in about 15 seconds. Starts two worker processes, enqueues a realistic
 * mix (instant, delayed, failing-then-succeeding, always-failing), kills the worker running the long
 * report with SIGKILL mid-job, shows the other worker recover and complete it, and ends with a
 * summary. Uses the configured Redis when reachable, else a private redis-server; leaves no process.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { out } from '../command-kit.js';
import { type GlobalOptions, openQueue, openRedis, redact } from '../connection.js';
import { CliError } from '../errors.js';
import { formatDuration, type Style } from '../format.js';
import { addCleanup, nextInterrupt } from '../lifecycle.js';
import type { ChildMessage } from './child.js';
import { DEMO_LEASE_MS, type DemoData, demoJobs, KIND_LABELS, REPORT_ID } from './jobs.js';
import { printSummary, summarize } from './summary.js';

interface DemoWorker {
  n: number;
  proc: ChildProcess;
  pid: number;
  exited: Promise<void>;
  alive: () => boolean;
}

function spawnWorker(
  n: number,
  url: string,
  queue: string,
  prefix: string,
  onMessage: (w: number, m: ChildMessage) => void,
): DemoWorker {
  // The child is this same CLI (launcher or main.ts, with the same loader flags) running a hidden command.
  const proc = fork(process.argv[1]!, ['_demo-worker', url, queue, '--prefix', prefix], {
    execArgv: process.execArgv,
    detached: true, // its own process group: Ctrl-C reaches only the demo, which closes the workers itself
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2_000);
  });
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.on('message', (m: ChildMessage) => onMessage(n, m));
  proc.once('exit', (code, signal) => {
    if (code && code !== 0)
      out.note(`surety: demo worker ${n} exited with ${code}: ${stderr.trim().split('\n').pop()}`);
    void signal;
  });
  addCleanup(async () => {
    if (!alive()) return;
    proc.kill('SIGKILL');
    await exited;
  });
  return { n, proc, pid: proc.pid ?? 0, exited, alive };
}

async function stopWorker(w: DemoWorker): Promise<void> {
  if (!w.alive()) return;
  if (w.proc.connected) w.proc.send({ type: 'close' });
  const timer = setTimeout(() => w.proc.kill('SIGKILL'), 10_000);
  await w.exited;
  clearTimeout(timer);
}

export async function runDemo(g: GlobalOptions): Promise<void> {
  const json = g.json === true;
  const paint = json ? out.err : out.paint;
  const say = (line: string) => (json ? out.note(line) : out.line(line));
  const t0 = performance.now();
  const log = (who: string, text: string, style?: Style) => {
    const at = paint('dim', `+${((performance.now() - t0) / 1_000).toFixed(1)}s`.padStart(7));
    say(`${at}  ${who.padEnd(8)}  ${style ? paint(style, text) : text}`);
  };
  say(paint('bold', 'Surety demo: two workers, a mix of jobs, and a worker killed with SIGKILL mid-job.'));
  const handle = await openRedis(g, { embeddedByDefault: true });
  const queueName = `demo-${randomBytes(2).toString('hex')}`;
  const queue = openQueue<DemoData>(queueName, handle, g, { defaults: { leaseMs: DEMO_LEASE_MS } });
  say(
    `Redis ${redact(handle.url)}, queue ${paint('bold', queueName)}, every lease ${formatDuration(DEMO_LEASE_MS)}`,
  );

  const ready = new Set<number>();
  let killed: DemoWorker | null = null;
  let killTimer: NodeJS.Timeout | undefined;
  const workers: DemoWorker[] = [];
  // The recovery that puts the killed worker's job back may hand it straight to an idle worker, whose
  // start then arrives before the recovering worker reports; a retried start waits for that report
  // (at most a second), so the story reads in its order.
  let recoveredShown = false;
  let heldStart: { flush: () => void; timer: NodeJS.Timeout } | null = null;
  const onMessage = (n: number, m: ChildMessage) => {
    const who = `worker ${n}`;
    if (m.type === 'ready') ready.add(n);
    else if (m.type === 'started' && m.id === REPORT_ID && m.attempt > 1 && !recoveredShown && !heldStart) {
      const flush = () => {
        if (!heldStart) return;
        clearTimeout(heldStart.timer);
        heldStart = null;
        log(who, `▶ ${m.id} started (attempt ${m.attempt}): a 3 s job`);
      };
      heldStart = { flush, timer: setTimeout(flush, 1_000) };
    } else if (m.type === 'started' && m.id === REPORT_ID) {
      log(who, `▶ ${m.id} started (attempt ${m.attempt}): a 3 s job`);
      if (!killed && !killTimer) {
        killTimer = setTimeout(() => {
          const victim = workers[n - 1]!;
          killed = victim;
          log(
            'demo',
            `⚡ kill -9 worker ${n} (pid ${victim.pid}) while it runs ${m.id}: its lease stops being renewed`,
            'magenta',
          );
          victim.proc.kill('SIGKILL');
        }, 1_000);
      }
    } else if (m.type === 'completed') {
      const after = m.id === REPORT_ID && m.attempt > 1 ? '  ← finished after the crash: nothing lost' : '';
      log(
        who,
        `✓ ${m.id.padEnd(11)} completed  attempt ${m.attempt}  ${formatDuration(m.ms)}${after}`,
        after ? 'green' : undefined,
      );
    } else if (m.type === 'failed') {
      const what =
        m.outcome === 'dead' ? 'dead      ' : `retry ${m.outcome === 'delayed' ? 'later' : 'now  '}`;
      log(
        who,
        `${m.outcome === 'dead' ? '✗' : '↻'} ${m.id.padEnd(11)} ${what} attempt ${m.attempt}  ${m.message}`,
        m.outcome === 'dead' ? 'red' : 'yellow',
      );
    } else if (m.type === 'recovered') {
      const ids = [...m.requeued, ...m.dead].join(', ');
      log(who, `↺ recovered ${ids} from the killed worker (lease expired): back to waiting`, 'cyan');
      recoveredShown = true;
      heldStart?.flush();
    }
  };
  const prefix = g.prefix ?? 'surety';
  workers.push(
    spawnWorker(1, handle.url, queueName, prefix, onMessage),
    spawnWorker(2, handle.url, queueName, prefix, onMessage),
  );
  const interrupt = nextInterrupt();
  let interrupted = false;
  void interrupt.signal.then(() => {
    interrupted = true;
  });
  try {
    await until(() => ready.size === 2 || interrupted, 30_000, 'the demo workers did not start', workers);
    say(`workers ready: pids ${workers.map((w) => w.pid).join(', ')} (concurrency 3 each)`);

    const jobs = demoJobs();
    await queue.addBulk(jobs.map((j) => ({ data: j.data, opts: { ...j.opts, id: j.id } })));
    const byKind = new Map<string, number>();
    for (const j of jobs)
      byKind.set(KIND_LABELS[j.data.kind], (byKind.get(KIND_LABELS[j.data.kind]) ?? 0) + 1);
    say(`enqueued ${jobs.length} jobs: ${[...byKind].map(([k, n]) => `${n} ${k}`).join(', ')}`);

    const finished = async () => {
      const c = await queue.counts();
      return c.completed + c.dead === jobs.length;
    };
    const deadline = Date.now() + 60_000;
    while (!interrupted && !(await finished())) {
      if (Date.now() > deadline)
        throw new CliError(`the demo did not finish within 60 s: ${JSON.stringify(await queue.counts())}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    clearTimeout(killTimer);
    await Promise.all(workers.map(stopWorker));
    if (interrupted) {
      say('interrupted: the workers finish their running jobs and stop; the jobs stay in Redis');
      process.exitCode = 130;
      return;
    }
    const summary = await summarize(queue, jobs);
    const ok = summary.recovered.includes(REPORT_ID) && summary.completed + summary.dead === jobs.length;
    if (json) {
      out.json({
        ...summary,
        ok,
        redis: redact(handle.url),
        embeddedRedisPid: handle.embeddedPid ?? null,
        workerPids: workers.map((w) => w.pid),
        killedPid: (killed as DemoWorker | null)?.pid ?? null,
        durationMs: Math.round(performance.now() - t0),
      });
    } else {
      printSummary(summary);
      say(`\nlook around (the jobs stay in Redis${handle.embeddedPid ? ', ./.surety/redis' : ''}):`);
      const r = handle.embeddedPid ? ' --redis embedded' : '';
      say(
        `  npx surety jobs ${queueName} --state dead${r}\n  npx surety job ${queueName} ${REPORT_ID}${r}     # both attempts, and the lease-expired error`,
      );
    }
    if (!ok) throw new CliError('the demo did not go as planned: the killed job was not recovered');
  } finally {
    interrupt.release();
    clearTimeout(killTimer);
    await Promise.all(workers.map(stopWorker));
  }
}

async function until(probe: () => boolean, ms: number, what: string, workers: DemoWorker[]): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (workers.some((w) => !w.alive())) throw new CliError(`${what}: a worker process exited`);
    if (Date.now() > deadline) throw new CliError(`${what} within ${formatDuration(ms)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
