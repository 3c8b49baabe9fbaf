import { Queue as BQ } from 'bullmq';
import { Redis } from 'ioredis';
import { importFromBullMQ } from '../src/migrate/index.js';
const url = 'redis://127.0.0.1:6399';
const conn = new Redis(url, { maxRetriesPerRequest: null });
const kind = process.argv[2];
const N = 5000;
await conn.flushall();
const bq = new BQ('big', { connection: conn });
for (let i = 0; i < N; i += 1000) {
  await bq.addBulk(Array.from({ length: 1000 }, (_, j) => ({ name: 'x', data: { n: i + j }, opts: kind === 'prio' ? { priority: 1 + ((i + j) % 7) } : kind === 'delay' ? { delay: 3_600_000 } : {} })));
}
await conn.config('RESETSTAT');
const t0 = performance.now();
const r = await importFromBullMQ({ connection: url, from: { queue: 'big' }, to: 'big' });
const ms = performance.now() - t0;
const stats = (await conn.info('commandstats')).split('\n').filter((l) => l.includes('fcall'));
console.log(kind, Math.round(ms), 'ms', r.moved.total, stats.join(' '));
await bq.close(); conn.disconnect();
