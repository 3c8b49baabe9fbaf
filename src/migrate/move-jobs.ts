/**
 * Moving the jobs of one BullMQ state, oldest first, one job per atomic step: on one server
 * import-bullmq.lua takes the job out of BullMQ and writes it here at once; across servers or Cluster
 * slots import-copy.lua writes it here, bullmq-take.lua takes it out of BullMQ, and import-undo.lua takes
 * the copy back if a BullMQ worker took the job in between. A job BullMQ changed since it was read is
 * read again (up to READS times); one that left the state (a BullMQ worker took it) is left to BullMQ.
 */

import type { Layout } from '../queue/partitions.js';
import type { RedisClient } from '../redis/client.js';
import { callScript, scripts } from '../scripts/specs.js';
import type { QueueKeys } from '../store/keys.js';
import {
  type ImportArgs,
  type KeptReason,
  mapJob,
  type RawJob,
  readJobs,
  type SourceState,
} from './bullmq-job.js';
import { type BullMQKeys, bullmqJobKey, bullmqLogsKey, bullmqTakenKey } from './bullmq-keys.js';

/** What a pass over one state did. */
export interface StateTally {
  moved: number;
  kept: { id: string; reason: KeptReason; detail: string }[];
  /** BullMQ options dropped, by name: how many jobs had them. */
  dropped: Map<string, number>;
}

export interface MoveContext {
  /** The client for Surety's keys, and for BullMQ's (the same one on one server). */
  surety: RedisClient;
  bullmq: RedisClient;
  /** Both on one server: each job moves in one script. */
  oneServer: boolean;
  bull: BullMQKeys;
  layout: Layout;
  eventsMaxLen: number;
  maxPayloadBytes: number;
  /** BullMQ's id counter when the run started: generated ids here start above it. */
  idFloor: string;
  dryRun: boolean;
  /** Scheduler ids staying in BullMQ: their delayed occurrences stay there. */
  bullSchedulers: ReadonlySet<string>;
}

const SOURCE_KEY: Record<SourceState, keyof BullMQKeys> = {
  waiting: 'wait',
  paused: 'paused',
  prioritized: 'prioritized',
  delayed: 'delayed',
  failed: 'failed',
};
const CHUNK = 200;
/** Reads of one job that BullMQ keeps changing before the migration gives up on it for this pass. */
const READS = 3;

export function emptyTally(): StateTally {
  return { moved: 0, kept: [], dropped: new Map() };
}

/** Moves (or, dry, counts) the jobs of `state`, in BullMQ's order: the next to run first. */
export async function moveState(m: MoveContext, state: SourceState, tally: StateTally): Promise<void> {
  const source = m.bull[SOURCE_KEY[state]] as string;
  const kind = state === 'waiting' || state === 'paused' ? 'list' : 'zset';
  const entries =
    kind === 'list' ? await listSnapshot(m.bullmq, source) : await zsetSnapshot(m.bullmq, source);
  for (let from = 0; from < entries.length; from += CHUNK) {
    let pending = entries.slice(from, from + CHUNK);
    for (let read = 1; read <= READS && pending.length > 0; read++) {
      const raws = await readJobs(
        m.bullmq,
        m.bull,
        pending.map((e) => e.id),
      );
      // One chunk's moves are sent together: one connection runs them in the order sent, so the
      // jobs keep BullMQ's order, without a round trip each.
      const outcomes = await Promise.all(
        pending.map((entry, i) => {
          const raw = raws[i];
          // Gone since the snapshot (finished, removed): nothing to do.
          return raw ? moveOne(m, state, source, kind, raw, entry.score, tally) : ('gone' as const);
        }),
      );
      const again: typeof pending = [];
      outcomes.forEach((outcome, i) => {
        if (outcome !== 'changed') return;
        if (read < READS) again.push(pending[i]!);
        else
          tally.kept.push({
            id: pending[i]!.id,
            reason: 'busy',
            detail: 'BullMQ kept changing it; run again',
          });
      });
      pending = again;
    }
  }
}

type Outcome = 'moved' | 'kept' | 'changed' | 'gone';

async function moveOne(
  m: MoveContext,
  state: SourceState,
  source: string,
  kind: 'list' | 'zset',
  raw: RawJob,
  score: number | null,
  tally: StateTally,
): Promise<Outcome> {
  const scheduler = state === 'delayed' ? raw.values.rjk : undefined;
  if (scheduler !== undefined && m.bullSchedulers.has(scheduler)) {
    tally.kept.push({
      id: raw.id,
      reason: 'scheduler-occurrence',
      detail: `the next run of scheduler ${raw.values.rjk}, which stays in BullMQ`,
    });
    return 'kept';
  }
  const due = state === 'delayed' && score !== null ? Math.floor(score / 4096) : null;
  const mapped = mapJob(raw, state, due, m.maxPayloadBytes);
  if (!mapped.ok) {
    tally.kept.push({ id: raw.id, reason: mapped.reason, detail: mapped.detail });
    return 'kept';
  }
  const k = m.layout.parts[m.layout.home(raw.id)]!;
  if (m.dryRun) {
    if (await m.surety.hexists(k.jobs, raw.id)) return keptTaken(tally, raw.id);
    count(tally, mapped.dropped);
    tally.moved++;
    return 'moved';
  }
  const bullKeys = {
    bullSource: source,
    bullJob: bullmqJobKey(m.bull, raw.id),
    bullLogs: bullmqLogsKey(m.bull, raw.id),
  };
  const args = { ...scriptArgs(m, k, mapped.args), partitions: m.layout.count };
  const take = { kind, fields: raw.fields.join('\n'), fingerprint: raw.fingerprint, id: raw.id };
  let outcome: 'moved' | 'exists' | 'changed' | 'gone';
  if (m.oneServer) {
    outcome = await callScript(m.surety, scripts.importBullmq, { ...k, ...bullKeys }, { ...args, ...take });
  } else {
    outcome = await copyThenTake(m, k, bullKeys, args, take);
  }
  if (outcome === 'exists') return keptTaken(tally, raw.id);
  if (outcome === 'moved') {
    count(tally, mapped.dropped);
    tally.moved++;
  }
  return outcome;
}

/**
 * A move across servers: the copy is written held (no worker sees it), the original taken out of
 * BullMQ, then the copy released; if BullMQ kept the job (a BullMQ worker took it first), the held
 * copy is deleted. The job runs in one system only.
 */
async function copyThenTake(
  m: MoveContext,
  k: QueueKeys,
  bullKeys: { bullSource: string; bullJob: string; bullLogs: string },
  args: ReturnType<typeof scriptArgs> & { partitions: number },
  take: { kind: string; fields: string; fingerprint: string; id: string },
): Promise<'moved' | 'exists' | 'changed' | 'gone'> {
  const copied = await callScript(m.surety, scripts.importCopy, k, {
    ...args,
    fingerprint: take.fingerprint,
  });
  if (copied === 'exists') return 'exists';
  const taken = await callScript(
    m.bullmq,
    scripts.bullmqTake,
    { ...k, ...bullKeys, bullTaken: bullmqTakenKey(m.bull, take.id) },
    take,
  );
  if (taken === 'moved') {
    await releaseCopy(m.surety, k, take.id, take.fingerprint, m.eventsMaxLen);
    return 'moved';
  }
  await callScript(m.surety, scripts.importUndo, k, { id: take.id, fingerprint: take.fingerprint });
  return taken;
}

/** Makes a held copy visible (import-release.lua): waiting, delayed or dead, as its record says. */
export function releaseCopy(
  surety: RedisClient,
  k: QueueKeys,
  id: string,
  fingerprint: string,
  eventsMaxLen: number,
): Promise<unknown> {
  return callScript(surety, scripts.importRelease, k, {
    now: '',
    wakeChannel: k.wakeChannel,
    eventsMaxLen,
    id,
    fingerprint,
  });
}

/**
 * Takes job `raw` out of BullMQ if its hash still holds exactly what was copied (`fingerprint`), from
 * whichever of the states it is in. Returns that state, or null when BullMQ changed or took the job.
 */
export async function takeUnchanged(
  bullmq: RedisClient,
  bull: BullMQKeys,
  k: QueueKeys,
  raw: RawJob,
  fingerprint: string,
): Promise<SourceState | null> {
  if (raw.fingerprint !== fingerprint) return null;
  const bullKeys = {
    bullJob: bullmqJobKey(bull, raw.id),
    bullLogs: bullmqLogsKey(bull, raw.id),
    bullTaken: bullmqTakenKey(bull, raw.id),
  };
  const take = { fields: raw.fields.join('\n'), fingerprint, id: raw.id };
  for (const state of Object.keys(SOURCE_KEY) as SourceState[]) {
    const kind = state === 'waiting' || state === 'paused' ? 'list' : 'zset';
    const bullSource = bull[SOURCE_KEY[state]] as string;
    const taken = await callScript(
      bullmq,
      scripts.bullmqTake,
      { ...k, ...bullKeys, bullSource },
      { ...take, kind },
    );
    if (taken === 'moved') return state;
    if (taken === 'changed') return null;
  }
  return null;
}

function scriptArgs(m: MoveContext, k: QueueKeys, a: ImportArgs) {
  return {
    now: '',
    wakeChannel: k.wakeChannel,
    eventsMaxLen: m.eventsMaxLen,
    id: a.id,
    state: a.state,
    created: a.created,
    due: a.due,
    finished: a.finished,
    optionTail: a.optionTail,
    data: a.data,
    attempts: a.attempts,
    errors: a.errors,
    logs: a.logs,
    progress: a.progress,
    idFloor: m.idFloor,
  };
}

function keptTaken(tally: StateTally, id: string): 'kept' {
  tally.kept.push({ id, reason: 'id-taken', detail: 'a job of the target queue has this id' });
  return 'kept';
}

function count(tally: StateTally, dropped: readonly string[]): void {
  for (const name of dropped) tally.dropped.set(name, (tally.dropped.get(name) ?? 0) + 1);
}

interface Entry {
  id: string;
  score: number | null;
}

/** A list's ids, the next BullMQ takes (its tail) first, read in slices so no reply is huge. */
async function listSnapshot(client: RedisClient, key: string): Promise<Entry[]> {
  const out: Entry[] = [];
  const length = await client.llen(key);
  for (let end = length - 1; end >= 0; end -= 1_000) {
    const slice = await client.lrange(key, Math.max(0, end - 999), end);
    for (let i = slice.length - 1; i >= 0; i--) out.push({ id: slice[i]!, score: null });
  }
  return dedupe(out);
}

/** A zset's ids by score, lowest (next to run) first. */
async function zsetSnapshot(client: RedisClient, key: string): Promise<Entry[]> {
  const out: Entry[] = [];
  for (let start = 0; ; start += 1_000) {
    const slice = await client.zrange(key, start, start + 999, 'WITHSCORES');
    for (let i = 0; i < slice.length; i += 2) out.push({ id: slice[i]!, score: Number(slice[i + 1]) });
    if (slice.length < 2_000) break;
  }
  return dedupe(out);
}

/** Slices read while the list or zset moves can overlap: each id once. */
function dedupe(entries: Entry[]): Entry[] {
  const seen = new Set<string>();
  return entries.filter((e) => {
    if (seen.has(e.id)) return false;
    seen.add(e.id);
    return true;
  });
}
