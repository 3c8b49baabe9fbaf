/**
 * What Surety's own client code costs per single add (`npx tsx bench/client-cost.ts [--n N] [--rounds R]`):
 * on a private redis-server, N awaited `queue.add` calls against N awaited raw FCALLs of the same
 * function (add-one) with the same keys and arguments built beforehand, alternating, R rounds each.
 * Reported per add: this process's user CPU (process.cpuUsage) and wall time, and the difference: what
 * validation, option encoding, routing, tracing and the script runner add on top of ioredis and Redis.
 *
 * A profiling aid for issue #17, not a comparison with other libraries. The difference is a far steadier
 * figure than the full bench's enqueue-serial on a noisy machine (both sides share the machine's state
 * of the moment), so it shows a client-side change of a few microseconds that the bench cannot.
 */
import { Redis } from 'ioredis';
import { Queue } from '../src/index.js';
import { libraryFunction } from '../src/scripts/functions.js';
import { scripts } from '../src/scripts/specs.js';
import { queueKeys } from '../src/store/keys.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { median } from './stats.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const N = arg('--n', 20_000);
const ROUNDS = arg('--rounds', 3);

interface Cost {
  userUs: number;
  wallUs: number;
}

async function time(n: number, one: (i: number) => Promise<unknown>): Promise<Cost> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await one(i);
  const wall = performance.now() - t0;
  return { userUs: process.cpuUsage(c0).user / n, wallUs: (wall * 1000) / n };
}

const server = await startRedis();
const url = `redis://127.0.0.1:${server.port}`;
const redis = new Redis(server.port, '127.0.0.1');
const queue = new Queue('client-cost', { connection: url });
try {
  await queue.add({ warm: true }); // loads the library; the raw calls below need it loaded
  const k = queueKeys('surety', 'client-cost');
  const fn = libraryFunction(redis, scripts.addOne.name);
  if (fn === null) throw new Error('this server does not run Redis Functions');
  const keys = scripts.addOne.keys.map((name) => k[name as keyof typeof k] as string);
  // add-one's arguments for a plain job, as the queue sends them (see enqueue.ts, addOneScript).
  const fixed = ['', k.wakeChannel, '10000', '1', ''];
  const raw = (i: number) =>
    redis.call('FCALL', [fn, keys.length, ...keys, ...fixed, '', '', '', '', `{"i":${i}}`, '', '30000']);
  const add = (i: number) => queue.add({ i });
  await time(1_000, add);
  await time(1_000, raw);
  const surety: Cost[] = [];
  const bare: Cost[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    surety.push(await time(N, add));
    bare.push(await time(N, raw));
  }
  const m = (xs: Cost[], f: keyof Cost) => median(xs.map((x) => x[f]));
  console.log(`${N} serial adds x ${ROUNDS} rounds (medians), per add:`);
  console.log(
    `  queue.add     user CPU ${m(surety, 'userUs').toFixed(1)} µs, wall ${m(surety, 'wallUs').toFixed(1)} µs`,
  );
  console.log(
    `  raw FCALL     user CPU ${m(bare, 'userUs').toFixed(1)} µs, wall ${m(bare, 'wallUs').toFixed(1)} µs`,
  );
  console.log(
    `  Surety's own  user CPU ${(m(surety, 'userUs') - m(bare, 'userUs')).toFixed(1)} µs, wall ${(m(surety, 'wallUs') - m(bare, 'wallUs')).toFixed(1)} µs`,
  );
} finally {
  await queue.close();
  redis.disconnect();
  await server.stop();
}
