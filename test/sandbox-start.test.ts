/**
 * A sandboxed attempt counts where its module starts (issue 32 with issue 33's sandboxes): the start
 * mark goes to Redis when the sandbox acknowledges the job, not when the worker hands it to the pool,
 * so a job whose sandbox never took it (loading, dying, its worker killed) was never counted.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from './helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

describe('the start mark of a sandboxed attempt', () => {
  it.each(['thread', 'process'] as const)(
    'in %s mode is written when the module starts the job, not when the worker dispatches it',
    async (mode) => {
      // A module whose load waits for a file the test writes: the job is dispatched meanwhile.
      const dir = mkdtempSync(join(tmpdir(), 'surety-start-'));
      const go = join(dir, 'go');
      const file = join(dir, 'slow-load.mjs');
      writeFileSync(
        file,
        `import { existsSync } from 'node:fs';
while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 10));
export default () => 'ran';
`,
      );
      const name = uniqueName();
      const q = new Queue(name, { connection: fx.url });
      const w = new Worker(name, pathToFileURL(file), { connection: fx.url, sandbox: mode });
      open.push(w, q);
      const { id } = await q.add({});
      await waitUntil(
        () => w.diagnostics().lanes.some((l) => l.runningJobs.some((j) => j.id === id)),
        'dispatched to the pool',
      );
      const [secs, micros] = await fx.redis.time();
      const releasedAt = Number(secs) * 1_000 + Math.floor(Number(micros) / 1_000);
      writeFileSync(go, '');
      expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('ran');
      const info = (await q.getJob(id))!;
      expect(info.attempts).toBe(1);
      expect(info.startedAt).toBeGreaterThanOrEqual(releasedAt);
    },
    60_000,
  );
});
