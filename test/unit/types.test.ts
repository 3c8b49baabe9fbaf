import { describe, expectTypeOf, it } from 'vitest';
import type { AddedJob, Job, JobInfo, JobState, Queue, Worker } from '../../src/index.js';

interface Email {
  to: string;
}
interface Sent {
  messageId: string;
}

describe('public types', () => {
  it('Queue and Worker carry Data and Result through', () => {
    expectTypeOf<Queue<Email, Sent>['add']>().parameter(0).toEqualTypeOf<Email>();
    expectTypeOf<Queue<Email, Sent>['add']>().returns.resolves.toEqualTypeOf<AddedJob>();
    expectTypeOf<Queue<Email, Sent>['getJob']>().returns.resolves.toEqualTypeOf<JobInfo<
      Email,
      Sent
    > | null>();
    expectTypeOf<Queue<Email, Sent>['waitFor']>().returns.resolves.toEqualTypeOf<Sent>();
    expectTypeOf<JobInfo<Email, Sent>['state']>().toEqualTypeOf<JobState>();
    expectTypeOf<ConstructorParameters<typeof Worker<Email, Sent>>[1]>()
      .parameter(0)
      .toEqualTypeOf<Job<Email>>();
    expectTypeOf<ConstructorParameters<typeof Worker<Email, Sent>>[1]>().returns.toEqualTypeOf<
      Sent | Promise<Sent>
    >();
    expectTypeOf<Job<Email>['data']>().toEqualTypeOf<Email>();
  });

  it('worker events are typed', () => {
    // Checked by the compiler only: never called, so no connection is made.
    const listen = (w: Worker<Email, Sent>) =>
      w.on('completed', (job, result) => {
        expectTypeOf(job.data).toEqualTypeOf<Email>();
        expectTypeOf(result).toEqualTypeOf<Sent>();
      });
    const onError = (w: Worker<Email, Sent>) =>
      w.on('error', (err) => {
        expectTypeOf(err.code).toEqualTypeOf<string>();
      });
    expectTypeOf(listen).toBeFunction();
    expectTypeOf(onError).toBeFunction();
  });
});
