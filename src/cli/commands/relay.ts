/**
 * `surety relay --postgres <url>`: runs one outbox relay (surety/postgres, docs/postgres.md) until
 * SIGTERM/SIGINT, printing a line per batch; then closes it: the batch in progress finishes (or is
 * abandoned after --grace, its rows left for the next relay) and the process exits 0.
 */
import type { Command } from 'commander';
import type { SuretyError } from '../../errors.js';
import { createOutbox, type RelayProgress } from '../../postgres/index.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { openRedis, redact } from '../connection.js';
import { formatDuration, parseDuration } from '../format.js';
import { nextInterrupt } from '../lifecycle.js';
import { openPostgres, redactPostgres } from '../postgres.js';

interface RelayCliOptions {
  postgres: string;
  table: string;
  batch: number;
  poll: string;
  grace: string;
  partitions: string;
  migrate?: boolean;
}

export function registerRelay(program: Command): void {
  const cmd = program
    .command('relay')
    .summary('move committed jobs from a Postgres outbox into Redis (a daemon)')
    .description(
      'run a relay of the transactional outbox (surety/postgres): move the jobs committed to the Postgres table into their queues, until SIGTERM/SIGINT; several relays may run at once. See docs/postgres.md.',
    )
    .requiredOption('--postgres <url>', 'the Postgres database of the outbox (postgres://user:pass@host/db)')
    .option('--table <name>', 'the outbox table', 'surety_outbox')
    .option('--batch <n>', 'rows per batch (one transaction)', intOption('--batch', 1, 10_000), 500)
    .option('--poll <duration>', 'look for rows this often without a notification', '1s')
    .option(
      '--grace <duration>',
      'on SIGTERM/SIGINT, how long the batch in progress may take to finish',
      '10s',
    )
    .option(
      '--partitions <n>',
      "partitions of the queues, or 'auto' for the count recorded in Redis (see docs/scaling.md)",
      'auto',
    )
    .option('--migrate', 'create or upgrade the outbox table first (outbox.migrate())')
    .action(async (o: RelayCliOptions, c: Command) => {
      const g = globals(c);
      const json = g.json === true;
      const pollMs = Math.max(10, parseDuration(o.poll, '--poll'));
      const graceMs = parseDuration(o.grace, '--grace');
      const partitions = o.partitions === 'auto' ? 'auto' : intOption('--partitions', 1, 1024)(o.partitions);
      const note = (err: SuretyError | Error) => {
        const code = (err as { code?: unknown }).code;
        if (json) out.jsonLine({ event: 'error', code, message: err.message });
        else out.note(`surety: ${typeof code === 'string' ? `${code}: ` : ''}${err.message}`);
      };
      const pool = await openPostgres(o.postgres, note);
      const outbox = createOutbox({ pool, table: o.table });
      if (o.migrate) {
        const m = await outbox.migrate();
        if (m.applied.length > 0 && !json) out.note(`surety: migrated ${o.table} to version ${m.version}`);
      }
      // Fails now (ERR_POSTGRES_SCHEMA, with what to do) when the table was never created.
      const before = await outbox.counts();
      const handle = await openRedis(g);
      const relay = outbox.relay({
        // The command's client: the relay leaves closing it to the exit cleanups.
        connection: handle.client,
        ...(g.prefix ? { prefix: g.prefix } : {}),
        partitions,
        batch: o.batch,
        pollMs,
        closeTimeoutMs: graceMs,
        logger: { warn: (m) => out.note(m) },
      });
      relay.on('error', note);
      relay.on('progress', (p) => printProgress(p, json));
      const { signal, release } = nextInterrupt();
      try {
        if (json) {
          out.jsonLine({
            event: 'ready',
            table: o.table,
            batch: o.batch,
            pending: before.pending,
            pid: process.pid,
          });
        } else {
          out.note(
            `surety: relay of ${o.table} (${redactPostgres(o.postgres)}) to ${redact(handle.url)}, ${before.pending} pending, batches of ${o.batch}; Ctrl-C to stop`,
          );
        }
        const sig = await signal;
        if (json) out.jsonLine({ event: 'closing', signal: sig, graceMs });
        else out.note(`surety: ${sig}: finishing the batch in progress (up to ${formatDuration(graceMs)})`);
      } finally {
        release();
        await relay.close();
      }
      const s = relay.stats();
      if (json) out.jsonLine({ event: 'closed', relayed: s.relayed, failed: s.failed });
      else out.note(`surety: relay stopped (${s.relayed} relayed, ${s.failed} failed)`);
    });
  examples(cmd, [
    'surety relay --postgres postgres://app@db/shop',
    'surety relay --postgres "$DATABASE_URL" --table surety_outbox --batch 1000 --migrate',
    'surety relay --postgres "$DATABASE_URL" --json | jq -c "select(.failed | length > 0)"',
  ]);
}

/** One line per batch (and one per job refused for good), or a JSON line with --json. */
function printProgress(p: RelayProgress, json: boolean): void {
  if (json) {
    out.jsonLine({ event: 'progress', ...p, at: new Date().toISOString() });
    return;
  }
  const { paint } = out;
  const head = `${paint('dim', new Date().toLocaleTimeString('en-GB'))}  `;
  const parts = [`${paint('green', `relayed ${p.relayed}`)}`];
  if (p.existing > 0) parts.push(`${p.existing} already in Redis`);
  if (p.deferred > 0) parts.push(paint('yellow', `${p.deferred} left pending`));
  if (p.failed.length > 0) parts.push(paint('red', `${p.failed.length} failed`));
  out.line(`${head}${parts.join('  ')}  ${paint('dim', formatDuration(p.ms))}`);
  for (const f of p.failed)
    out.line(`${head}${paint('red', '✗ failed')}  ${f.queue} ${f.id}  ${f.code}: ${f.message}`);
}
