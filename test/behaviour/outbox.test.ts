/**
 * The transactional outbox (surety/postgres) through its public names, against this file's private
 * PostgreSQL and Redis: what a transaction's outcome means for its jobs, validation at outbox.add,
 * relays side by side, rows Redis refuses (for good, or until it has memory again), migrations.
 * Crashes of relays and servers: test/processes/outbox-crash.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { TcpProxy } from '../../chaos/tcp-proxy.js';
import {
  NotSerializableError,
  PayloadTooLargeError,
  PostgresSchemaError,
  Queue,
  ValidationError,
} from '../../src/index.js';
import {
  createOutbox,
  type Outbox,
  type Relay,
  type RelayOptions,
  type RelayProgress,
} from '../../src/postgres/index.js';
import { committed, newPool, rolledBack, uniqueTable, usePostgres } from '../helpers/outbox.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const db = usePostgres();
const open = closeAfterEach();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A migrated outbox on its own table. */
async function newOutbox(opts: { maxPayloadBytes?: number } = {}): Promise<Outbox> {
  const outbox = createOutbox({ pool: db.pool, table: uniqueTable(), ...opts });
  await outbox.migrate();
  return outbox;
}

function startRelay(outbox: Outbox, opts: RelayOptions = {}): Relay {
  const relay = outbox.relay({ connection: fx.url, pollMs: 50, ...opts });
  open.push(relay);
  return relay;
}

function queue(name: string, partitions: number | 'auto' = 'auto'): Queue {
  const q = new Queue(name, { connection: fx.url, partitions });
  open.push(q);
  return q;
}

async function total(q: Queue): Promise<number> {
  const c = await q.counts();
  return c.waiting + c.delayed + c.blocked + c.active + c.completed + c.dead;
}

describe('outbox: what the transaction decides', () => {
  it("a rolled-back transaction's jobs never reach Redis; a committed one's do", async () => {
    const outbox = await newOutbox();
    const name = uniqueName('emails');
    const q = queue(name);
    const lost = await rolledBack(db.pool, async (client) => [
      await outbox.add(client, name, { order: 1 }),
      ...(await outbox.addBulk(client, name, [{ data: { order: 2 } }, { data: { order: 3 } }])),
    ]);
    const kept = await committed(db.pool, (client) => outbox.add(client, name, { order: 4 }));
    const relay = startRelay(outbox);

    await waitUntil(() => relay.stats().relayed === 1, 'the committed job relayed');
    expect(await q.getJob(kept.id)).toMatchObject({ state: 'waiting', data: { order: 4 } });
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
    for (const { id } of lost) expect(await q.getJob(id)).toBeNull();
    expect(await total(q)).toBe(1);
  });

  it('a committed job reaches Redis once, with its id, data and options', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('emails');
    const q = queue(name);
    const runAt = new Date(Date.now() + 3_600_000);
    const [given, generated, delayed] = await committed(db.pool, async (client) => [
      await outbox.add(
        client,
        name,
        { to: 'ada@example.com', lines: [1, 2], nested: { b: 1, a: 2 } },
        {
          id: 'order-42-confirmation',
          name: 'confirm',
          priority: 5,
          maxAttempts: 7,
          leaseMs: 5_000,
          backoff: { type: 'fixed', delayMs: 250 },
          timeoutMs: 60_000,
          group: 'tenant-1',
          keep: { completed: false },
        },
      ),
      await outbox.add(client, name, 'plain string data'),
      await outbox.add(client, name, null, { runAt }),
    ]);
    expect(given.id).toBe('order-42-confirmation');
    expect(generated.id).toMatch(UUID);
    expect(delayed.id).toMatch(UUID);
    const relay = startRelay(outbox);

    await waitUntil(() => relay.stats().relayed === 3, 'the three jobs relayed');
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
    expect(await q.getJob(given.id)).toMatchObject({
      state: 'waiting',
      data: { to: 'ada@example.com', lines: [1, 2], nested: { b: 1, a: 2 } },
      name: 'confirm',
      priority: 5,
      maxAttempts: 7,
      leaseMs: 5_000,
      backoff: { type: 'fixed', delayMs: 250 },
      timeoutMs: 60_000,
      group: 'tenant-1',
      keep: { completed: false, dead: true },
    });
    // Key order survives (the json column keeps the text as given).
    expect(Object.keys((await q.getJob(given.id))!.data as object)).toEqual(['to', 'lines', 'nested']);
    expect(await q.getJob(generated.id)).toMatchObject({ state: 'waiting', data: 'plain string data' });
    expect(await q.getJob(delayed.id)).toMatchObject({ state: 'delayed', runAt: runAt.getTime() });
    expect(await total(q)).toBe(3);
    expect(relay.stats()).toMatchObject({ relayed: 3, existing: 0, failed: 0, deferred: 0 });
  });

  it('jobs reach each queue in the order they were added, across transactions, and stages keep parents first', async () => {
    const outbox = await newOutbox();
    const [a, b] = [uniqueName('a'), uniqueName('b')];
    const [qa, qb] = [queue(a), queue(b)];
    const expected: string[] = [];
    for (let t = 0; t < 5; t++) {
      await committed(db.pool, async (client) => {
        for (let i = 0; i < 10; i++) {
          const { id } = await outbox.add(client, a, { t, i }, { id: `a-${t}-${i}` });
          expected.push(id);
          if (i % 3 === 0) await outbox.add(client, b, { t, i });
        }
      });
    }
    // A child in queue b whose parents are jobs of queue a, added in the same transaction (after them).
    const child = await committed(db.pool, async (client) => {
      const p1 = await outbox.add(client, a, { parent: 1 });
      const p2 = await outbox.add(client, a, { parent: 2 });
      expected.push(p1.id, p2.id);
      return outbox.add(
        client,
        b,
        { child: true },
        {
          dependsOn: [
            { queue: a, id: p1.id },
            { queue: a, id: p2.id },
          ],
        },
      );
    });
    startRelay(outbox, { batch: 7 });

    await waitUntil(async () => (await outbox.counts()).pending === 0, 'the outbox to empty');
    const waiting = await qa.getJobs('waiting', { limit: 1_000 });
    expect(waiting.map((j) => j.id)).toEqual(expected);
    expect(await qb.getJob(child.id)).toMatchObject({ state: 'blocked' });
    expect(await outbox.failed()).toEqual([]);
  });

  it('a commit wakes the relay at once (LISTEN/NOTIFY), without waiting for its poll', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('wake');
    const q = queue(name);
    const relay = startRelay(outbox, { pollMs: 60_000 });
    // It looks at start, and once more when its LISTEN is up (for what it missed); then it sleeps for a
    // minute unless notified.
    await waitUntil(() => relay.stats().listening && relay.stats().polls >= 2, 'the relay idle, listening');
    const started = Date.now();
    const { id } = await committed(db.pool, (client) => outbox.add(client, name, { n: 1 }));
    await waitUntil(() => relay.stats().relayed === 1, 'the job relayed', 5_000);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await q.getJob(id)).toMatchObject({ state: 'waiting', data: { n: 1 } });
    expect(relay.stats()).toMatchObject({ batches: 1, relayed: 1, polls: 3 });
  });
});

describe('outbox.add validation', () => {
  it('refuses what queue.add refuses, with the same typed error, and inserts nothing', async () => {
    const outbox = await newOutbox({ maxPayloadBytes: 100 });
    const name = uniqueName('v');
    const cases: { data: unknown; opts?: object; cls: new (...a: never[]) => Error; code: string }[] = [
      { data: {}, opts: { maxAttempts: 0 }, cls: ValidationError, code: 'ERR_INVALID_OPTION' },
      { data: {}, opts: { attempts: 3 }, cls: ValidationError, code: 'ERR_INVALID_OPTION' },
      { data: {}, opts: { delayMs: 5, runAt: 10 }, cls: ValidationError, code: 'ERR_INVALID_OPTION' },
      { data: {}, opts: { id: 'schedule:x' }, cls: ValidationError, code: 'ERR_INVALID_JOB_ID' },
      { data: {}, opts: { id: 'a\nb' }, cls: ValidationError, code: 'ERR_INVALID_JOB_ID' },
      { data: { when: new Date() }, cls: NotSerializableError, code: 'ERR_NOT_SERIALIZABLE' },
      { data: { n: 10n }, cls: NotSerializableError, code: 'ERR_NOT_SERIALIZABLE' },
      { data: { big: 'x'.repeat(200) }, cls: PayloadTooLargeError, code: 'ERR_PAYLOAD_TOO_LARGE' },
    ];
    const small = new Queue(name, { connection: fx.url, maxPayloadBytes: 100 });
    open.push(small);
    await committed(db.pool, async (client) => {
      for (const c of cases) {
        const fromOutbox = await outbox.add(client, name, c.data, c.opts as never).catch((e: Error) => e);
        const fromQueue = await small.add(c.data, c.opts as never).catch((e: Error) => e);
        expect(fromOutbox).toBeInstanceOf(c.cls);
        expect(fromOutbox).toMatchObject({ code: c.code, message: (fromQueue as Error).message });
      }
      const badName = await outbox.add(client, 'no spaces!', {}).catch((e: Error) => e);
      expect(badName).toMatchObject({ code: 'ERR_INVALID_QUEUE_NAME' });
      expect(() => new Queue('no spaces!', { connection: fx.url })).toThrow((badName as Error).message);
      // addBulk: one bad item refuses the call, good items before it included.
      const bulk = await outbox
        .addBulk(client, name, [{ data: { ok: 1 } }, { data: {}, opts: { priority: 1.5 } }])
        .catch((e: Error) => e);
      expect(bulk).toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringMatching(/^priority/) });
      const tooMany = await outbox
        .addBulk(
          client,
          name,
          Array.from({ length: 10_001 }, () => ({ data: 1 })),
        )
        .catch((e: Error) => e);
      expect(tooMany).toMatchObject({ message: 'addBulk takes at most 10000 jobs per call, got 10001' });
      // The Pool is not the transaction: refused before anything runs on it.
      await expect(outbox.add(db.pool as never, name, {})).rejects.toThrow(/not the Pool/);
    });
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
  });

  it('addBulk takes 10 000 jobs in one call, in order', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('bulk');
    const items = Array.from({ length: 10_000 }, (_, i) => ({ data: { i } }));
    const ids = await committed(db.pool, (client) => outbox.addBulk(client, name, items));
    expect(ids).toHaveLength(10_000);
    expect(new Set(ids.map((r) => r.id)).size).toBe(10_000);
    const first = await outbox.pending({ limit: 3 });
    expect(first.map((e) => [e.id, e.data])).toEqual(ids.slice(0, 3).map((r, i) => [r.id, { i }]));
  });
});

describe('outbox: schema', () => {
  it('migrate twice is a no-op; two at once apply it once; add before migrate says to migrate', async () => {
    const table = uniqueTable();
    const outbox = createOutbox({ pool: db.pool, table });
    const early = await committed(db.pool, (client) => outbox.add(client, 'q', {})).catch((e: Error) => e);
    expect(early).toBeInstanceOf(PostgresSchemaError);
    expect(early).toMatchObject({
      code: 'ERR_POSTGRES_SCHEMA',
      message: expect.stringMatching(
        new RegExp(`outbox table ${table} does not exist: call outbox\\.migrate\\(\\)`),
      ),
    });
    await expect(outbox.counts()).rejects.toBeInstanceOf(PostgresSchemaError);

    const [one, two] = await Promise.all([outbox.migrate(), outbox.migrate()]);
    expect([one.applied, two.applied].sort()).toEqual([[], [1]]);
    const columns = async () =>
      (
        await db.pool.query(
          `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`,
          [table],
        )
      ).rows;
    const before = await columns();
    expect(before.map((c) => c.column_name)).toContain('job_id');
    expect(await outbox.migrate()).toEqual({ version: 1, applied: [] });
    expect(await columns()).toEqual(before);
    // Its version in surety_schema, beside pgStep's components.
    const versions = await db.pool.query('SELECT version FROM surety_schema WHERE component = $1', [
      `outbox:${table}`,
    ]);
    expect(versions.rows).toEqual([{ version: 1 }]);
  });

  it('a table migrated by a newer Surety is refused, and a table name that is not an identifier too', async () => {
    const table = uniqueTable();
    const outbox = createOutbox({ pool: db.pool, table });
    await outbox.migrate();
    await db.pool.query('UPDATE surety_schema SET version = 2 WHERE component = $1', [`outbox:${table}`]);
    await expect(outbox.migrate()).rejects.toMatchObject({
      code: 'ERR_POSTGRES_SCHEMA',
      message: expect.stringMatching(/schema version 2, made by a newer Surety; this one knows up to 1/),
    });
    for (const bad of [
      'x"; DROP TABLE y; --',
      '1abc',
      'a-b',
      '',
      'a.b.c',
      'surety_schema',
      'x'.repeat(51),
      42,
    ]) {
      expect(() => createOutbox({ pool: db.pool, table: bad as string })).toThrow(ValidationError);
    }
    expect(() => createOutbox({ pool: db.pool, table: 'x'.repeat(50) })).not.toThrow();
    expect(() => createOutbox({ pool: {} as never })).toThrow(/pool must be a node-postgres Pool/);
  });

  it('a schema-qualified table works end to end, its version kept in that schema', async () => {
    const schema = uniqueTable().replace('outbox_', 'app_');
    await db.pool.query(`CREATE SCHEMA ${schema}`);
    const table = `${schema}.orders_outbox`;
    const outbox = createOutbox({ pool: db.pool, table });
    expect(outbox.table).toBe(table);
    await outbox.migrate();
    const name = uniqueName('qualified');
    const q = queue(name);
    const { id } = await committed(db.pool, (client) => outbox.add(client, name, { n: 1 }));
    const relay = startRelay(outbox, { pollMs: 60_000 });
    await waitUntil(() => relay.stats().relayed === 1, 'the job relayed');
    expect(await q.getJob(id)).toMatchObject({ data: { n: 1 } });
    const versions = await db.pool.query(`SELECT component, version FROM ${schema}.surety_schema`);
    expect(versions.rows).toEqual([{ component: `outbox:${table}`, version: 1 }]);
    // Its relays are woken on the channel of the table's name: a commit moves at once (poll: 60 s).
    await waitUntil(() => relay.stats().listening, 'the LISTEN connection');
    const second = await committed(db.pool, (client) => outbox.add(client, name, { n: 2 }));
    await waitUntil(() => relay.stats().relayed === 2, 'the second job, on notification');
    expect(await q.getJob(second.id)).toMatchObject({ data: { n: 2 } });
  });
});

describe('outbox relays', () => {
  it('two relays at once move each job once', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('two');
    const q = queue(name);
    const ids = new Set<string>();
    for (let t = 0; t < 3; t++) {
      const added = await committed(db.pool, (client) =>
        outbox.addBulk(
          client,
          name,
          Array.from({ length: 1_000 }, (_, i) => ({ data: { t, i } })),
        ),
      );
      for (const { id } of added) ids.add(id);
    }
    const relays = [startRelay(outbox, { batch: 50 }), startRelay(outbox, { batch: 50 })];

    await waitUntil(
      () => relays[0]!.stats().relayed + relays[1]!.stats().relayed >= 3_000,
      'the relays to move every row',
      20_000,
    );
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
    const stats = relays.map((r) => r.stats());
    expect(stats[0]!.relayed + stats[1]!.relayed).toBe(3_000);
    expect(stats.map((s) => s.existing)).toEqual([0, 0]);
    // Both took part (SKIP LOCKED hands each batch to one of them).
    expect(stats.every((s) => s.relayed > 0)).toBe(true);
    const inRedis = await q.getJobs('waiting', { limit: 10_000 });
    expect(inRedis).toHaveLength(3_000);
    expect(new Set(inRedis.map((j) => j.id))).toEqual(ids);
  });

  it('a job Redis refuses for good stays in the outbox as failed, with its error; the others go on', async () => {
    const outbox = await newOutbox();
    const [split, fine] = [uniqueName('split'), uniqueName('fine')];
    // Recorded in Redis with 2 partitions; a relay configured for 1 is refused (ERR_PARTITIONS_MISMATCH).
    await queue(split, 2).add({ seed: true }, { id: 'seed' });
    const [refused, ok] = await committed(db.pool, async (client) => [
      await outbox.add(client, split, { n: 1 }, { id: 'refused-1' }),
      await outbox.add(client, fine, { n: 2 }),
    ]);
    // Rows that slipped past outbox.add (written by hand): Redis's add refuses their options.
    await db.pool.query(
      `INSERT INTO "${outbox.table}" (queue, job_id, data, opts)
       VALUES ($1, 'bad-opts', '{}', '{"id":"bad-opts","maxAttempts":0}'), ($1, 'null-opts', '{}', 'null')`,
      [fine],
    );
    const progress: unknown[] = [];
    const relay = startRelay(outbox, { partitions: 1 });
    relay.on('progress', (p) => progress.push(p));

    await waitUntil(() => relay.stats().relayed + relay.stats().failed === 4, 'every row handled');
    expect(await queue(fine).getJob(ok.id)).toMatchObject({ state: 'waiting', data: { n: 2 } });
    const failed = await outbox.failed();
    expect(failed).toEqual([
      {
        id: refused.id,
        queue: split,
        data: { n: 1 },
        opts: { id: refused.id },
        addedAt: expect.any(Number),
        attempts: 1,
        error: {
          code: 'ERR_PARTITIONS_MISMATCH',
          message: expect.stringMatching(
            /has 2 partition\(s\) in Redis but this client was configured with partitions: 1/,
          ),
          at: expect.any(Number),
        },
      },
      expect.objectContaining({
        id: 'bad-opts',
        error: expect.objectContaining({
          code: 'ERR_INVALID_OPTION',
          message: expect.stringMatching(/^maxAttempts/),
        }),
      }),
      expect.objectContaining({
        id: 'null-opts',
        error: expect.objectContaining({
          code: 'ERR_INVALID_OPTION',
          message: 'job options must be an object, got null',
        }),
      }),
    ]);
    expect(Math.abs(failed[0]!.error!.at - Date.now())).toBeLessThan(60_000);
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 3 });
    expect(relay.stats()).toMatchObject({ relayed: 1, failed: 3 });
    expect(progress).toContainEqual(
      expect.objectContaining({
        failed: expect.arrayContaining([expect.objectContaining({ id: refused.id })]),
      }),
    );
    await relay.close();

    // Fixed (a relay that reads the count from Redis): retried, it moves; the others are removed.
    const fixed = startRelay(outbox);
    expect(await outbox.retryFailed([refused.id])).toBe(1);
    await waitUntil(() => fixed.stats().relayed === 1, 'the retried job relayed');
    expect(await queue(split, 'auto').getJob(refused.id)).toMatchObject({ data: { n: 1 } });
    expect(await outbox.removeFailed(['bad-opts', 'null-opts'])).toBe(2);
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
  });

  it("a job stored without options gets the relay's defaults, as queue.add with only an id gives them", async () => {
    const outbox = await newOutbox();
    const name = uniqueName('defaults');
    const defaults = {
      priority: 3,
      maxAttempts: 4,
      leaseMs: 7_000,
      backoff: { type: 'fixed' as const, delayMs: 90 },
    };
    const { id } = await committed(db.pool, (client) => outbox.add(client, name, { n: 1 }));
    const relay = startRelay(outbox, { defaults });
    await waitUntil(() => relay.stats().relayed === 1, 'the job relayed');
    const direct = new Queue(name, { connection: fx.url, defaults });
    open.push(direct);
    await direct.add({ n: 1 }, { id: 'direct' });

    const [relayed, added] = [await direct.getJob(id), await direct.getJob('direct')];
    expect(relayed).toMatchObject({ priority: 3, maxAttempts: 4, leaseMs: 7_000 });
    const { id: _a, createdAt: _b, runAt: _c, ...fromRelay } = relayed!;
    const { id: _d, createdAt: _e, runAt: _f, ...fromAdd } = added!;
    expect(fromRelay).toEqual(fromAdd); // all but the id and the times
  });

  it('a row left pending ends the run: the batch locked after it is rolled back, its rows not moved first', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('stop');
    const q = queue(name);
    await committed(db.pool, async (client) => {
      await outbox.add(client, name, { n: 1 }, { id: 'a' });
      // Its parent is nowhere (yet): Redis refuses it, and the row stays pending for another try.
      await outbox.add(client, name, { n: 2 }, { id: 'b', dependsOn: ['ghost'] });
      await outbox.add(client, name, { n: 3 }, { id: 'c' });
      await outbox.add(client, name, { n: 4 }, { id: 'd' });
    });
    // Batches of 2: [a, b] moves while [c, d] is locked ahead of it.
    const relay = startRelay(outbox, { batch: 2 });
    relay.on('error', () => {});
    const first = await new Promise<RelayProgress>((resolve) => relay.once('progress', resolve));
    await relay.close();

    expect(first).toMatchObject({ relayed: 1, deferred: 1 });
    expect(await q.getJob('a')).toMatchObject({ state: 'waiting' });
    expect(await q.getJob('c')).toBeNull();
    expect(await q.getJob('d')).toBeNull();
    const pending = await outbox.pending();
    expect(pending.map((p) => [p.id, p.attempts])).toEqual([
      ['b', 1],
      ['c', 0],
      ['d', 0],
    ]);
    expect(relay.stats()).toMatchObject({ batches: 1, relayed: 1, deferred: 1 });
  });

  it('rows written by hand are checked as queue.add checks them, though the relay takes stored JSON as it is', async () => {
    const outbox = await newOutbox({ maxPayloadBytes: 200 });
    const name = uniqueName('by-hand');
    const q = queue(name);
    const rows: [string, string, string][] = [
      ['spaced', '{ "a" : [1, 2.50, "x"] }', '{"id":"spaced"}'],
      ['minus-zero', '{"z": -0.0}', '{"id":"minus-zero"}'],
      ['huge', '{"n": 1e999}', '{"id":"huge"}'],
      ['deep', `${'['.repeat(102)}1${']'.repeat(102)}`, '{"id":"deep"}'],
      ['big', JSON.stringify('x'.repeat(300)), '{"id":"big"}'],
      ['schedule:x', '{}', '{"id":"schedule:x"}'],
    ];
    for (const [id, data, opts] of rows) {
      await db.pool.query(
        `INSERT INTO "${outbox.table}" (queue, job_id, data, opts) VALUES ($1, $2, $3, $4)`,
        [name, id, data, opts],
      );
    }
    const relay = startRelay(outbox);

    await waitUntil(() => relay.stats().relayed + relay.stats().failed === rows.length, 'every row handled');
    expect(await q.getJob('spaced')).toMatchObject({ data: { a: [1, 2.5, 'x'] } });
    const zero = (await q.getJob('minus-zero'))?.data as { z: number };
    expect(Object.is(zero.z, 0)).toBe(true);
    const failed = await outbox.failed();
    expect(failed.map((f) => [f.id, f.error?.code])).toEqual([
      ['huge', 'ERR_NOT_SERIALIZABLE'],
      ['deep', 'ERR_NOT_SERIALIZABLE'],
      ['big', 'ERR_PAYLOAD_TOO_LARGE'],
      ['schedule:x', 'ERR_INVALID_JOB_ID'],
    ]);
    expect(failed[0]!.error!.message).toBe('item 0 data.n is Infinity, which JSON cannot hold');
  });

  it('while Redis is full the rows stay pending with the error, and move once it has memory', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('full');
    const q = queue(name);
    await q.add({ warm: true }); // the queue exists before Redis fills up
    const { id } = await committed(db.pool, (client) => outbox.add(client, name, { n: 1 }));
    await fx.redis.config('SET', 'maxmemory', '1');
    try {
      const relay = startRelay(outbox);
      const errors: string[] = [];
      relay.on('error', (e) => errors.push(e.code));
      const [pending] = await waitUntil(async () => {
        const rows = await outbox.pending();
        return rows[0]?.error ? rows : null;
      }, 'the refusal recorded on the row');
      expect(pending).toMatchObject({ id, attempts: expect.any(Number), error: { code: 'ERR_REDIS_OOM' } });
      expect(errors).toContain('ERR_REDIS_OOM');
      expect(await outbox.failed()).toEqual([]);
      expect(await q.getJob(id)).toBeNull();
    } finally {
      await fx.redis.config('SET', 'maxmemory', '0');
    }
    await waitUntil(async () => (await outbox.counts()).pending === 0, 'the row moved once Redis has memory');
    expect(await q.getJob(id)).toMatchObject({ state: 'waiting', data: { n: 1 } });
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
  });

  it('the outbox marks a refused call carried to forget go with the next call: none is left after close', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('marks');
    const q = queue(name);
    await q.add({ warm: true });
    const relay = startRelay(outbox);
    await committed(db.pool, (client) => outbox.add(client, name, { n: 1 }));
    // Committed and deleted: its mark is to be forgotten with the relay's next call to the queue.
    await waitUntil(() => relay.stats().relayed === 1, 'the first row relayed');
    await fx.redis.config('SET', 'maxmemory', '1');
    try {
      await committed(db.pool, (client) => outbox.add(client, name, { n: 2 }));
      await waitUntil(async () => (await outbox.pending())[0]?.error, 'the next call refused (Redis full)');
    } finally {
      await fx.redis.config('SET', 'maxmemory', '0');
    }
    await waitUntil(() => relay.stats().relayed === 2, 'the second row relayed once Redis has memory');
    await relay.close();
    // Only the expiry scan's cursor field is left: the first row's mark went with the retried call,
    // the second's at close.
    expect(await fx.redis.hkeys(q.keys.outboxed)).toEqual(['~']);
  });

  it('close() abandons a batch stuck on Redis after closeTimeoutMs; its rows stay for the next relay', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('stuck');
    const q = queue(name);
    const ids = await committed(db.pool, (client) =>
      outbox.addBulk(
        client,
        name,
        Array.from({ length: 20 }, (_, i) => ({ data: { i } })),
      ),
    );
    // Redis takes no write for a while: the batch's addBulk waits.
    await fx.redis.call('CLIENT', 'PAUSE', '20000', 'WRITE');
    let stuck: Relay;
    try {
      stuck = startRelay(outbox, { closeTimeoutMs: 200 });
      await waitUntil(() => stuck.stats().polls === 1, 'the batch locked, waiting on Redis');
      const started = Date.now();
      await stuck.close();
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await fx.redis.call('CLIENT', 'UNPAUSE');
    }
    expect(stuck.stats()).toMatchObject({ relayed: 0, batches: 0 });
    // Rolled back: the rows are pending again, and the next relay moves them.
    expect(await outbox.counts()).toMatchObject({ pending: 20 });
    const next = startRelay(outbox);
    await waitUntil(() => next.stats().relayed === 20, 'the next relay');
    expect((await q.getJobs('waiting', { limit: 100 })).map((j) => j.id)).toEqual(ids.map((r) => r.id));
  });

  it('a batch Redis never answers (a black-holed network) is abandoned after batchTimeoutMs; its rows move once it heals', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('blackhole');
    const q = queue(name);
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: fx.server.port });
    try {
      const relay = outbox.relay({ connection: proxy.url, pollMs: 50, batchTimeoutMs: 300 });
      open.push(relay);
      const errors: string[] = [];
      relay.on('error', (err) => errors.push(err.code));
      await waitUntil(() => relay.stats().polls > 0, 'the relay polls');
      proxy.blackhole();
      const ids = await committed(db.pool, (client) =>
        outbox.addBulk(
          client,
          name,
          Array.from({ length: 5 }, (_, i) => ({ data: { i } })),
        ),
      );
      await waitUntil(() => errors.includes('ERR_CONNECTION'), 'the stuck batch abandoned');
      // Rolled back: the rows wait for a batch that gets an answer.
      expect(await outbox.counts()).toMatchObject({ pending: 5 });
      proxy.heal();
      await waitUntil(async () => (await outbox.counts()).pending === 0, 'relayed after the network healed');
      expect((await q.getJobs('waiting', { limit: 100 })).map((j) => j.id)).toEqual(ids.map((r) => r.id));
    } finally {
      await proxy.close();
    }
  });

  it('a transaction that commits late, with an older row, is not left behind by batches locked ahead', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('late');
    const q = queue(name);
    // Rows written by hand send no notification: only the relay's own rescans can find the late row
    // (its poll is an hour away).
    const insert = (client: { query: typeof db.pool.query }, from: number, to: number) =>
      client.query(
        `INSERT INTO "${outbox.table}" (queue, job_id, data, opts)
         SELECT $1, 'j' || n, json_build_object('n', n), json_build_object('id', 'j' || n)
         FROM generate_series($2::int, $3::int) AS n`,
        [name, from, to],
      );
    const TOTAL = 2_000;
    const BATCH = 5;
    await insert(db.pool, 1, 100);
    const late = await db.pool.connect();
    try {
      await late.query('BEGIN');
      await insert(late, 0, 0); // the late row: its id is older than every row after the first 100
      await insert(db.pool, 101, TOTAL);
      const relay = startRelay(outbox, { batch: BATCH, pollMs: 3_600_000 });
      await waitUntil(() => relay.stats().relayed >= 200, 'the relay past the late row');
      await late.query('COMMIT');
      const relayedAtCommit = relay.stats().relayed;
      // The test means something only if the run had far to go when the late row committed.
      expect(relayedAtCommit).toBeLessThan(TOTAL - 500);
      await waitUntil(() => relay.stats().relayed === TOTAL + 1, 'every row relayed');
      const order = (await q.getJobs('waiting', { limit: TOTAL + 1 })).map((j) => j.id);
      expect(order).toHaveLength(TOTAL + 1);
      // Every 16th batch of a run locks from the oldest pending row again; the two batches locked
      // when the late row committed go first.
      expect(order.indexOf('j0')).toBeLessThanOrEqual(relayedAtCommit + (16 + 2) * BATCH);
      expect(order.filter((id) => id !== 'j0')).toEqual(Array.from({ length: TOTAL }, (_, i) => `j${i + 1}`));
    } finally {
      late.release();
    }
  });

  it('a relay whose pool has two connections (LISTEN and one more) still drains full batches, in order', async () => {
    const pool = newPool(db.server.url, 2);
    try {
      const outbox = createOutbox({ pool, table: uniqueTable() });
      await outbox.migrate();
      const name = uniqueName('small-pool');
      const ids = await committed(pool, async (client) =>
        (
          await outbox.addBulk(
            client,
            name,
            Array.from({ length: 23 }, (_, i) => ({ data: { i } })),
          )
        ).map((j) => j.id),
      );
      // Each full batch locks the next one ahead: with no third connection, that waits for the
      // batch before it to commit and give its connection back.
      const relay = startRelay(outbox, { batch: 5 });
      await waitUntil(() => relay.stats().relayed === 23, 'every job relayed');
      const waiting = await queue(name).getJobs('waiting', { limit: 100 });
      expect(waiting.map((j) => j.id)).toEqual(ids);
      expect(relay.stats()).toMatchObject({ batches: 5, errors: 0 });
      await relay.close();
    } finally {
      await pool.end();
    }
  });

  it('close() gives back every Postgres connection, and options are checked when the relay starts', async () => {
    const outbox = await newOutbox();
    const busy = () => db.pool.totalCount - db.pool.idleCount;
    const before = busy();
    const relay = startRelay(outbox);
    await waitUntil(() => relay.stats().listening, 'the LISTEN connection');
    expect(busy()).toBeGreaterThan(before);
    await relay.close();
    await relay.close(); // idempotent
    expect(busy()).toBe(before);
    expect(relay.stats().listening).toBe(false);
    expect(() => outbox.relay({ batch: 10_001 })).toThrow(/batch must be an integer from 1 to 10000/);
    expect(() => outbox.relay({ pollMs: 5 })).toThrow(/pollMs must be an integer/);
    expect(() => outbox.relay({ prefix: 'bad prefix' })).toThrow(/prefix must be/);
    expect(() => outbox.relay({ batchSize: 5 } as RelayOptions)).toThrow(/unknown option "batchSize"/);
  });
});
