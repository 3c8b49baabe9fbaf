/**
 * Bulk import (`surety add <queue> --file jobs.ndjson`): one job per line, added in chunks of CHUNK
 * (one atomic round trip each). A bad line never stops the import: lines that are not JSON are
 * rejected as they are read; when the library's validation refuses a chunk (addBulk writes nothing
 * then), that chunk is added line by line, so only the bad lines are rejected, each with its number
 * and the typed ValidationError's code and message.
 */
import { createReadStream, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ValidationError } from '../errors.js';
import type { Queue } from '../queue/queue.js';
import type { AddedJob, JobOptions } from '../types.js';
import { out } from './command-kit.js';
import { CliError } from './errors.js';
import { formatCount } from './format.js';
import { ProgressBar } from './progress.js';

const CHUNK = 500;
const SHOWN_REJECTS = 20;

export interface Rejected {
  line: number;
  code?: string;
  reason: string;
}

export interface ImportSummary {
  queue: string;
  file: string;
  /** Non-blank lines read. */
  lines: number;
  accepted: number;
  new: number;
  /** Accepted lines whose id already existed: nothing was enqueued for them. */
  existing: number;
  rejected: Rejected[];
}

interface Item {
  line: number;
  data: unknown;
  opts: JobOptions;
}

function parseLine(text: string, line: number, defaults: JobOptions, envelope: boolean): Item | Rejected {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { line, reason: `not valid JSON (${(err as Error).message})` };
  }
  if (!envelope) return { line, data: value, opts: defaults };
  const bad = {
    line,
    reason: 'with --envelope each line must be {"data": ..., "opts": {...}} (opts optional)',
  };
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !('data' in value)) return bad;
  const { data, opts = {}, ...rest } = value as { data: unknown; opts?: unknown };
  if (Object.keys(rest).length > 0 || opts === null || typeof opts !== 'object' || Array.isArray(opts))
    return bad;
  const merged = { ...defaults, ...(opts as Record<string, unknown>) } as JobOptions & { runAt?: unknown };
  if (typeof merged.runAt === 'string') {
    const at = Date.parse(merged.runAt);
    if (!Number.isFinite(at))
      return { line, reason: `opts.runAt is not a date: ${JSON.stringify(merged.runAt)}` };
    merged.runAt = at;
  }
  return { line, data, opts: merged as JobOptions };
}

export async function importFile(
  queue: Queue,
  file: string,
  o: { defaults: JobOptions; envelope: boolean; json: boolean },
): Promise<ImportSummary> {
  let size: number | null = null;
  if (file !== '-') {
    try {
      size = statSync(file).size;
    } catch (err) {
      throw new CliError(
        `cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`,
      );
    }
  }
  const summary: ImportSummary = {
    queue: queue.name,
    file,
    lines: 0,
    accepted: 0,
    new: 0,
    existing: 0,
    rejected: [],
  };
  const count = (added: AddedJob[]) => {
    summary.accepted += added.length;
    for (const a of added) a.isNew ? summary.new++ : summary.existing++;
  };
  const flush = async (chunk: Item[]) => {
    if (chunk.length === 0) return;
    try {
      count(await queue.addBulk(chunk.map(({ data, opts }) => ({ data, opts }))));
      return;
    } catch (err) {
      if (!(err instanceof ValidationError)) throw stopped(summary, chunk, err);
    }
    // Some line of this chunk failed validation and nothing of it was written: find the bad lines.
    const results = await Promise.allSettled(chunk.map((item) => queue.add(item.data, item.opts)));
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') count([r.value]);
      else if (r.reason instanceof ValidationError)
        summary.rejected.push({ line: chunk[i]!.line, code: r.reason.code, reason: r.reason.message });
      else throw stopped(summary, chunk, r.reason);
    });
  };
  const input = file === '-' ? process.stdin : createReadStream(file);
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  const bar = new ProgressBar(size);
  let lineNo = 0;
  let bytes = 0;
  let chunk: Item[] = [];
  for await (const raw of lines) {
    lineNo++;
    bytes += Buffer.byteLength(raw) + 1;
    const text = raw.trim();
    if (text === '') continue;
    summary.lines++;
    const item = parseLine(text, lineNo, o.defaults, o.envelope);
    if ('data' in item) chunk.push(item);
    else summary.rejected.push(item);
    if (chunk.length >= CHUNK) {
      await flush(chunk);
      chunk = [];
      bar.update(bytes, summary.lines);
    }
  }
  await flush(chunk);
  bar.done();
  summary.rejected.sort((a, b) => a.line - b.line);
  print(summary, o.json);
  return summary;
}

function stopped(s: ImportSummary, chunk: Item[], err: unknown): CliError {
  const first = chunk[0]!.line;
  const last = chunk[chunk.length - 1]!.line;
  const why = err instanceof Error ? err.message : String(err);
  return new CliError(
    `import stopped at lines ${first}-${last} (${why}): ${formatCount(s.accepted)} jobs from earlier lines were added, lines ${first}-${last} may or may not have been, later lines were not. Re-run with ids (--envelope) to make a re-run idempotent.`,
  );
}

function print(s: ImportSummary, json: boolean): void {
  if (json) {
    out.json(s);
    return;
  }
  const { paint } = out;
  const rejected = s.rejected.length;
  out.line(
    `imported ${s.file === '-' ? 'stdin' : s.file} into ${s.queue}: ${paint('green', `${formatCount(s.accepted)} accepted`)}` +
      ` (${formatCount(s.new)} new, ${formatCount(s.existing)} already existed), ` +
      (rejected > 0 ? paint('red', `${formatCount(rejected)} rejected`) : '0 rejected'),
  );
  for (const r of s.rejected.slice(0, SHOWN_REJECTS))
    out.line(`  line ${r.line}: ${r.code ? `${r.code}: ` : ''}${r.reason}`);
  if (rejected > SHOWN_REJECTS)
    out.line(`  ... and ${rejected - SHOWN_REJECTS} more (--json lists them all)`);
}
