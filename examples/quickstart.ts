/**
 * Quick start: a queue, a worker, a retried job, a delayed job, a dead letter.
 * Uses REDIS_URL when set; otherwise starts a private redis-server (from PATH) for the run.
 *   npm run example
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedRedis, Queue, UnrecoverableError, Worker } from '../src/index.js';

interface Email {
  to: string;
  subject: string;
}

// The private server's data directory is removed however the run ends: at the end, on an error, on Ctrl-C.
const dir = process.env.REDIS_URL ? null : mkdtempSync(join(tmpdir(), 'surety-quickstart-'));
let server: EmbeddedRedis | null = null;
async function cleanUp(): Promise<void> {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void cleanUp().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143)));
}

try {
  server = dir ? await new EmbeddedRedis({ dir, aof: true }).start() : null;
  const connection = process.env.REDIS_URL ?? server!.url;
  console.log(`Redis: ${connection}${server ? ' (private redis-server, AOF on)' : ''}`);
  await walkThrough(connection);
} finally {
  await cleanUp();
}

async function walkThrough(connection: string): Promise<void> {
  const queue = new Queue<Email, { messageId: string }>('emails', { connection });
  const worker = new Worker<Email, { messageId: string }>(
    'emails',
    async (job) => {
      if (job.data.to.endsWith('@invalid')) throw new UnrecoverableError(`no such domain for ${job.data.to}`);
      if (job.data.to.startsWith('flaky') && job.attempt < 2) throw new Error('SMTP timeout');
      return { messageId: `msg-${job.id}-${job.attempt}` };
    },
    { connection, concurrency: 10 },
  );
  worker.on('completed', (job, result) =>
    console.log(`  completed ${job.id} (attempt ${job.attempt}) -> ${result.messageId}`),
  );
  worker.on('failed', (job, err, outcome) =>
    console.log(`  failed    ${job.id} (attempt ${job.attempt}): ${err.message} -> ${outcome}`),
  );

  const now = await queue.add({ to: 'ada@example.com', subject: 'Welcome' });
  const flaky = await queue.add(
    { to: 'flaky@example.com', subject: 'Retry me' },
    { backoff: { type: 'fixed', delayMs: 200 } },
  );
  const later = await queue.add({ to: 'bob@example.com', subject: 'In 500 ms' }, { delayMs: 500 });
  const bad = await queue.add({ to: 'eve@invalid', subject: 'Never' });
  const again = await queue.add({ to: 'ada@example.com', subject: 'Welcome' }, { id: now.id });
  console.log(
    `added ${now.id}, ${flaky.id}, ${later.id} (delayed), ${bad.id}; re-adding id ${again.id}: isNew=${again.isNew}`,
  );

  console.log('result of', now.id, await queue.waitFor(now.id));
  console.log('result of', flaky.id, await queue.waitFor(flaky.id));
  console.log('result of', later.id, await queue.waitFor(later.id));
  const deadErr = (await queue.waitFor(bad.id).then(
    () => new Error('expected a dead job'),
    (e: Error) => e,
  )) as Error & { code?: string };
  console.log(`job ${bad.id} is dead: ${deadErr.code} ${deadErr.message}`);
  const info = await queue.getJob(later.id);
  console.log(`delayed job started ${info!.startedAt! - info!.runAt} ms after its due time`);
  console.log('counts', JSON.stringify(await queue.counts()));

  await worker.close();
  await queue.close();
}
