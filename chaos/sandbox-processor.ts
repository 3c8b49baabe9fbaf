/**
 * The processor module of the sandboxed chaos workers (worker-child.ts with a `sandbox` mode): the same
 * attempt as the function processor (act.ts), run in a worker thread or a child process. It finds the
 * run's seed, its worker's pid and execution log in the environment the worker set before starting its
 * sandboxes (a thread and a forked process both inherit it).
 */
import { type ActEnv, actOut, type ChaosJob } from './act.js';
import { ExecLogWriter } from './exec-log.js';

const mode = process.env.CHAOS_SANDBOX;
const env: ActEnv = {
  seed: Number(process.env.CHAOS_SEED),
  pid: Number(process.env.CHAOS_WORKER_PID),
  log: new ExecLogWriter(process.env.CHAOS_LOG ?? ''),
  sandbox: mode === 'thread' || mode === 'process' ? mode : 'process',
};

export default function chaosProcessor(job: ChaosJob) {
  return actOut(job, env);
}
