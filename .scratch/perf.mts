import { Queue as BQ } from 'bullmq';
import { Redis } from 'ioredis';
import { importFromBullMQ } from '../src/migrate/index.js';
const url = 'redis://127.0.0.1:6399';
const conn = new Redis(url, { maxRetriesPerRequest: null });
await conn.flushall();
const bq = new BQ('big', { connection: conn });
const N = Number(process.argv[2] ?? 20000);
for (let i = 0; i < N; i += 1000) {
  await bq.addBulk(Array.from({ length: 1000 }, (_, j) => ({ name: 'x', data: { n: i + j, pad: 'y'.repeat(100) }, opts: (i + j) % 4 === 0 ? { priority: 1 + ((i + j) % 7) } : (i + j) % 4 === 1 ? { delay: 3_600_000 } : {} })));
}
const t0 = performance.now();
const r = await importFromBullMQ({ connection: url, from: { queue: 'big' }, to: 'big', onProgress: (m) => console.log(Math.round(performance.now() - t0), m) });
const ms = performance.now() - t0;
console.log(N, 'jobs', Math.round(ms), 'ms', Math.round((r.moved.total / ms) * 1000), 'jobs/s', JSON.stringify(r.moved));
await bq.close(); conn.disconnect();
