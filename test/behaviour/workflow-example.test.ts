/**
 * The worked example of docs/workflows.md (issue 36): an order charged once, shipping and the
 * confirmation email as children in their own queues, then a "delivered" signal with a timeout.
 * Run as written there, with stand-ins for the payment and mail services.
 */
import { describe, expect, it } from 'vitest';
import { Queue, SignalTimeoutError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function setup(timeoutMs: number) {
  const names = {
    orders: uniqueName('orders'),
    shipping: uniqueName('shipping'),
    emails: uniqueName('emails'),
  };
  const charged: string[] = [];
  const mailed: string[] = [];
  const payments = {
    charge: (orderId: string) => {
      charged.push(orderId);
      return `ch_${orderId}`;
    },
  };
  const mail = { send: (orderId: string, template: string) => mailed.push(`${orderId} ${template}`) };
  const connection = fx.url;
  const orders = new Queue<{ orderId: string }>(names.orders, { connection });
  const workers = [
    new Worker<{ orderId: string }>(
      names.orders,
      async (job) => {
        const { orderId } = job.data;
        const charge = await job.step('charge', () => payments.charge(orderId));
        const [ship] = await job.addChildren([
          { queue: names.shipping, data: { orderId } },
          {
            queue: names.emails,
            data: { orderId, template: 'confirmation' },
            opts: { ignoreDependencyFailure: true },
          },
        ]);
        const done = await job.waitForChildren();
        const tracking = done[`${names.shipping}:${ship!.id}`] as { tracking: string };
        try {
          const proof = await job.waitForSignal<{ at: string }>('delivered', { timeoutMs });
          return { charge, tracking, deliveredAt: proof.at };
        } catch (err) {
          if (!(err instanceof SignalTimeoutError)) throw err;
          await job.step('chase', () => mail.send(orderId, 'where-is-it'));
          return { charge, tracking, deliveredAt: null };
        }
      },
      { connection },
    ),
    new Worker<{ orderId: string }>(names.shipping, (job) => ({ tracking: `TR-${job.data.orderId}` }), {
      connection,
    }),
    new Worker<{ orderId: string; template: string }>(
      names.emails,
      (job) => {
        mail.send(job.data.orderId, job.data.template);
      },
      { connection },
    ),
  ];
  open.push(orders, ...workers);
  return { orders, charged, mailed };
}

describe('docs/workflows.md: the order example', () => {
  it('charges once, ships and mails in parallel, then completes on the delivered signal', async () => {
    const { orders, charged, mailed } = setup(14 * 24 * 3_600_000);
    const { id } = await orders.add({ orderId: '42' }, { id: 'order-42' });
    await waitUntil(
      async () => (await orders.getJob(id))?.waitingForSignal?.name === 'delivered',
      'the order waits',
    );
    expect(await orders.signal(id, 'delivered', { at: '2026-11-28T10:00:00Z' })).toMatchObject({
      woke: true,
    });
    expect(await orders.waitFor(id, { timeoutMs: 10_000 })).toEqual({
      charge: 'ch_42',
      tracking: { tracking: 'TR-42' },
      deliveredAt: '2026-11-28T10:00:00Z',
    });
    expect(charged).toEqual(['42']);
    expect(mailed).toEqual(['42 confirmation']);
    expect((await orders.getJob(id))!.attempts).toBe(3);
  });

  it('chases the customer when the signal does not come in time', async () => {
    const { orders, mailed } = setup(200);
    const { id } = await orders.add({ orderId: '43' });
    expect(await orders.waitFor(id, { timeoutMs: 10_000 })).toMatchObject({ deliveredAt: null });
    expect(mailed).toEqual(['43 confirmation', '43 where-is-it']);
  });
});
