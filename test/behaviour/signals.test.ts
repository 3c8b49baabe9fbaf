/**
 * Signals (issue 36): job.waitForSignal parks a job without holding a slot, a lease or an attempt
 * until queue.signal brings the signal (or its timeout passes); a signal sent first is kept; each is
 * consumed once and replayed by later runs; a worker that lost its lease takes none.
 */
import { describe, expect, it } from 'vitest';
import { ParkedError, Queue, SignalTimeoutError, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue<D = unknown>() {
  const q = new Queue<D>(uniqueName(), { connection: fx.url });
  open.push(q);
  return q;
}

function worker(q: Queue, processor: ConstructorParameters<typeof Worker>[1], opts = {}) {
  const w = new Worker(q.name, processor, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

describe('job.waitForSignal and queue.signal', () => {
  it('parks the job (no slot, lease or attempt held) and runs it again from the top with the payload', async () => {
    const q = queue();
    let charged = 0;
    let runs = 0;
    const parked: string[] = [];
    const w = worker(q, async (job) => {
      runs++;
      const charge = await job.step('charge', () => ++charged);
      const approval = await job.waitForSignal<{ by: string }>('approved');
      return { charge, approval };
    });
    w.on('parked', (job) => parked.push(job.id));
    const { id } = await q.add({}, { maxAttempts: 1 });
    // The worker's `parked` event follows the script's reply, which may come after Redis shows it.
    await waitUntil(() => parked.length > 0, 'the worker says the job parked');
    expect(parked).toEqual([id]);
    expect((await q.getJob(id))?.state).toBe('delayed');
    const waiting = (await q.getJob(id))!;
    expect(waiting.attempts).toBe(1);
    expect(waiting.waitingForSignal).toEqual({ name: 'approved' });
    expect((await q.explain(id)).reasons).toEqual([
      expect.objectContaining({ code: 'WAITING_FOR_SIGNAL', signal: 'approved' }),
    ]);
    expect((await q.counts()).active).toBe(0);
    // A one-attempt job parked without spending its only attempt: the resumed run may still run.
    expect(await q.signal(id, 'approved', { by: 'ana' })).toEqual({
      delivered: true,
      state: 'waiting',
      woke: true,
    });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({ charge: 1, approval: { by: 'ana' } });
    expect(runs).toBe(2);
    expect(charged).toBe(1);
    const done = (await q.getJob(id))!;
    expect(done.attempts).toBe(2);
    expect(done.errors).toEqual([]);
  });

  it('keeps a signal sent before the wait and hands it over at once, without parking', async () => {
    const q = queue();
    const { id } = await q.add({}, { delayMs: 60_000 });
    expect(await q.signal(id, 'go', 7)).toEqual({ delivered: true, state: 'delayed', woke: false });
    expect(await q.signal(id, 'go', 8)).toEqual({ delivered: true, state: 'delayed', woke: false });
    expect(await q.signal(id, 'other')).toEqual({ delivered: true, state: 'delayed', woke: false });
    expect((await q.getJob(id))!.pendingSignals).toEqual([
      { name: 'go', payload: 7 },
      { name: 'go', payload: 8 },
      { name: 'other', payload: undefined },
    ]);
    expect((await q.explain(id)).reasons[0]!.code).toBe('DELAYED');
    const parked: string[] = [];
    const w = worker(q, async (job) => [await job.waitForSignal('go'), await job.waitForSignal('go')]);
    w.on('parked', (job) => parked.push(job.id));
    await q.promote(id);
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual([7, 8]);
    expect(parked).toEqual([]);
    expect((await q.getJob(id))!.pendingSignals).toEqual([{ name: 'other', payload: undefined }]);
  });

  it('consumes each signal once: a later run replays what its waits took, a second wait takes the next', async () => {
    const q = queue();
    const seen: unknown[][] = [];
    worker(
      q,
      async (job) => {
        const a = await job.waitForSignal('s');
        const b = await job.waitForSignal('s');
        seen.push([a, b]);
        if (seen.length === 1) throw new Error('once more: the next run replays both waits');
        return [a, b];
      },
      { backoffStrategies: {} },
    );
    const { id } = await q.add({}, { backoff: { type: 'fixed', delayMs: 1 } });
    await waitUntil(async () => (await q.getJob(id))?.state === 'delayed', 'the first wait parks');
    await q.signal(id, 's', 'first');
    await waitUntil(async () => {
      const job = await q.getJob(id);
      return job?.state === 'delayed' && job.attempts === 2;
    }, 'the second wait parks');
    await q.signal(id, 's', 'second');
    await q.signal(id, 's', 'unused');
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual(['first', 'second']);
    expect(seen.slice(-2)).toEqual([
      ['first', 'second'],
      ['first', 'second'],
    ]);
  });

  it('throws SignalTimeoutError on the run after the deadline, and a late signal is then kept unused', async () => {
    const q = queue();
    const outcomes: string[] = [];
    worker(q, async (job) => {
      try {
        await job.waitForSignal('delivered', { timeoutMs: 150 });
        return 'delivered';
      } catch (err) {
        if (err instanceof SignalTimeoutError) {
          outcomes.push(`${err.code} ${err.signalName}`);
          return 'timed out';
        }
        throw err;
      }
    });
    const { id } = await q.add({});
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('timed out');
    expect(outcomes).toEqual(['ERR_SIGNAL_TIMEOUT delivered']);
    expect(await q.signal(id, 'delivered', 1)).toEqual({
      delivered: false,
      state: 'completed',
      woke: false,
      reason: 'ended',
    });
  });

  it('keeps the deadline of a wait woken early (promote): the job parks again until the same time', async () => {
    const q = queue();
    let runs = 0;
    worker(q, async (job) => {
      runs++;
      return job.waitForSignal('go', { timeoutMs: 60_000 });
    });
    const { id } = await q.add({});
    const first = await waitUntil(async () => (await q.getJob(id))?.waitingForSignal, 'the job parks');
    expect(first.deadline).toBeGreaterThan(Date.now() + 50_000);
    const [reason] = (await q.explain(id)).reasons;
    expect(reason).toMatchObject({ code: 'WAITING_FOR_SIGNAL', signal: 'go', until: first.deadline });
    await q.promote(id);
    await waitUntil(() => runs === 2, 'the woken job ran');
    const again = await waitUntil(async () => (await q.getJob(id))?.waitingForSignal, 'the job parks again');
    expect(again).toEqual(first);
    await q.signal(id, 'go', 'late but in time');
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('late but in time');
  });

  it('a wait sent again after it ended answers what it ended with and takes no other signal', async () => {
    const q = queue();
    const sent: unknown[] = [];
    worker(q, async (job) => {
      const first = await job.waitForSignal('s');
      // The same call again (as a re-sent script call would be): the stored result, not the next signal.
      const { attemptOf } = await import('../../src/worker/job.js');
      const again = await attemptOf(job as never).store!.waitSignal(job as never, 's', 0, 0);
      sent.push(again);
      return first;
    });
    const { id } = await q.add({}, { delayMs: 60_000 });
    await q.signal(id, 's', 'one');
    await q.signal(id, 's', 'two');
    await q.promote(id);
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('one');
    expect(sent).toEqual([{ outcome: 'stored', value: '{"payload":"one","u":false}' }]);
    expect((await q.getJob(id))!.pendingSignals).toEqual([{ name: 's', payload: 'two' }]);
  });

  it('answers delivered: false for a job that does not exist, and refuses bad names and payloads', async () => {
    const q = queue();
    expect(await q.signal('nope', 'x')).toEqual({
      delivered: false,
      state: 'missing',
      woke: false,
      reason: 'missing',
    });
    const { id } = await q.add({}, { delayMs: 60_000 });
    await expect(q.signal(id, 'a\tb')).rejects.toBeInstanceOf(ValidationError);
    await expect(q.signal(id, '')).rejects.toBeInstanceOf(ValidationError);
    await expect(q.signal(id, 'x', () => 1)).rejects.toMatchObject({ code: 'ERR_NOT_SERIALIZABLE' });
    await expect(q.signal(id, 'x', 'y'.repeat(600_000))).rejects.toMatchObject({
      code: 'ERR_PAYLOAD_TOO_LARGE',
    });
  });

  it('refuses a timeout out of range and step names the waits use', async () => {
    const q = queue();
    const errors: unknown[] = [];
    worker(q, async (job) => {
      for (const t of [0, -1, 1.5, 11 * 365 * 24 * 3_600_000]) {
        await job.waitForSignal('x', { timeoutMs: t }).catch((e) => errors.push(e));
      }
      await job.step('~signal:0', () => 1).catch((e) => errors.push(e));
      return 'ok';
    });
    const { id } = await q.add({});
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('ok');
    expect(errors).toHaveLength(5);
    for (const e of errors) expect(e).toBeInstanceOf(ValidationError);
  });

  it('a signal racing the wait is never lost: sent while the job runs toward its wait, it is taken', async () => {
    const q = queue();
    for (let i = 0; i < 20; i++) {
      let release!: () => void;
      const gate = new Promise<void>((r) => {
        release = r;
      });
      const w = worker(q, async (job) => {
        await gate;
        return job.waitForSignal('go');
      });
      const { id } = await q.add({});
      await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'the job runs');
      const sent = q.signal(id, 'go', i);
      setImmediate(release);
      expect((await sent).delivered).toBe(true);
      expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe(i);
      await w.close();
    }
  });

  it('a parked job throws ParkedError to its processor and frees its slot for other jobs', async () => {
    const q = queue();
    const thrown: unknown[] = [];
    worker(
      q,
      async (job) => {
        if ((job.data as { wait: boolean }).wait) {
          try {
            await job.waitForSignal('never');
          } catch (e) {
            thrown.push(e);
            throw e;
          }
        }
        return 'done';
      },
      { concurrency: 1 },
    );
    const a = await q.add({ wait: true });
    const b = await q.add({ wait: false });
    expect(await q.waitFor(b.id, { timeoutMs: 10_000 })).toBe('done');
    await waitUntil(() => thrown.length === 1, 'the wait threw');
    expect(thrown[0]).toBeInstanceOf(ParkedError);
    const info = (await q.getJob(a.id))!;
    expect(info.state).toBe('delayed');
    expect(info.errors).toEqual([]);
  });
});
