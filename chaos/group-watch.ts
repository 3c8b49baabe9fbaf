/**
 * Group limits that change while the run goes on, and the samples of group state the verdict reads
 * (features-verdict.ts parkedViolations). g1 stays at concurrency 1 all run (its order is judged);
 * g3's concurrency and g4's rate limit, and the defaults, change every 2-4 s: every change that frees
 * a group must wake it, and none may leave a group parked longer than its limits allow.
 */
import type { GroupLimits, Queue } from '../src/index.js';
import type { ChaosResult, JobData } from './behaviour.js';
import type { GroupSample } from './features-verdict.js';
import type { Rng } from './rng.js';
import { within } from './time.js';

/** A fixed window, so a limit change never shortens a window in force (a matter of definition). */
const WINDOW_MS = 2_000;
const G3: readonly GroupLimits[] = [{ concurrency: 1 }, { concurrency: 2 }, { concurrency: null }];
const G4: readonly GroupLimits[] = [
  { rateLimit: { max: 5, durationMs: WINDOW_MS } },
  { rateLimit: null },
  { rateLimit: { max: 1_000, durationMs: WINDOW_MS } },
  { rateLimit: { max: 2, durationMs: WINDOW_MS } },
];
const DEFAULTS: readonly GroupLimits[] = [
  { concurrency: 4 },
  { concurrency: 3, rateLimit: { max: 200, durationMs: WINDOW_MS } },
];
const SAMPLE_MS = 1_000;

export class GroupWatch {
  /** Groups at concurrency 1 all run. */
  static readonly FIFO_GROUPS: readonly string[] = ['g1'];
  readonly samples: GroupSample[] = [];
  /** Limit changes applied: when (after the call resolved) and what. */
  readonly changes: { at: number; group: string | null; limits: GroupLimits }[] = [];
  private timers: NodeJS.Timeout[] = [];
  private inFlight = new Set<Promise<unknown>>();
  private step = 0;
  /** The next limit change (none once lift() was called). */
  private changeTimer: NodeJS.Timeout | undefined;
  private lifted = false;

  constructor(
    private readonly queue: Queue<JobData, ChaosResult>,
    private readonly rng: Rng,
  ) {}

  /** The limits in force at the start: defaults, g1 FIFO, g2 rate-limited, g3 and g4 as they start. */
  async setUp(): Promise<void> {
    const q = this.queue;
    await within(q.setGroupLimits(DEFAULTS[0]!), 10_000, 'setGroupLimits()');
    await within(q.setGroupLimits({ concurrency: 1 }, { group: 'g1' }), 10_000, 'setGroupLimits(g1)');
    await within(
      q.setGroupLimits({ rateLimit: { max: 100, durationMs: 1_000 } }, { group: 'g2' }),
      10_000,
      'setGroupLimits(g2)',
    );
    await within(q.setGroupLimits(G3[0]!, { group: 'g3' }), 10_000, 'setGroupLimits(g3)');
    await within(q.setGroupLimits(G4[0]!, { group: 'g4' }), 10_000, 'setGroupLimits(g4)');
  }

  start(): void {
    const change = () => {
      this.step++;
      const which = this.rng.int(0, 2);
      const [group, limits] =
        which === 0
          ? ['g3', G3[this.step % G3.length]!]
          : which === 1
            ? ['g4', G4[this.step % G4.length]!]
            : [null, DEFAULTS[this.step % DEFAULTS.length]!];
      this.track(
        within(
          group === null ? this.queue.setGroupLimits(limits) : this.queue.setGroupLimits(limits, { group }),
          5_000,
          'setGroupLimits',
        ).then(() => this.changes.push({ at: Date.now(), group, limits })),
      );
      if (!this.lifted) this.changeTimer = setTimeout(change, this.rng.int(2_000, 4_000));
    };
    this.changeTimer = setTimeout(change, this.rng.int(1_000, 3_000));
    let sampling = false;
    this.timers.push(
      setInterval(() => {
        if (sampling) return; // a read caught by a fault: skip until it settles
        sampling = true;
        const at = Date.now();
        this.track(
          within(this.queue.groups({ limit: 100 }), 2_000, 'groups()')
            .then((page) => {
              this.samples.push({ at, done: Date.now(), groups: page.groups });
            })
            .finally(() => {
              sampling = false;
            }),
        );
      }, SAMPLE_MS),
    );
  }

  /**
   * The chaos is over: no more changes, and g3, g4 and the defaults lose their rate limits, so the
   * drain is bounded by concurrency only (g4 at 2 jobs per 2 s could not drain a backlog in time).
   * Sampling goes on until stop(). Lifting a limit must wake its group: the parked verdict judges it.
   */
  async lift(): Promise<void> {
    clearTimeout(this.changeTimer);
    this.lifted = true;
    const lifts: [string | null, GroupLimits][] = [
      ['g3', { concurrency: null }],
      ['g4', { rateLimit: null }],
      [null, DEFAULTS[0]!],
    ];
    for (const [group, limits] of lifts) {
      await within(
        group === null ? this.queue.setGroupLimits(limits) : this.queue.setGroupLimits(limits, { group }),
        10_000,
        'setGroupLimits (lift)',
      ).then(
        () => this.changes.push({ at: Date.now(), group, limits }),
        () => {}, // the drain then waits on the limit in force, as a run with it would
      );
    }
  }

  async stop(): Promise<void> {
    clearTimeout(this.changeTimer);
    this.lifted = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    await Promise.allSettled([...this.inFlight]);
  }

  private track(p: Promise<unknown>): void {
    const settled = p.catch(() => {}); // faults make calls fail: a change or sample is then skipped
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
  }
}
