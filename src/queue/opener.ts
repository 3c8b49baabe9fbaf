/**
 * A Queue's layout, found once: the first call checks the server (version, eviction policy) and the
 * partition count recorded in Redis; later calls share that answer. A failed check (server unreachable,
 * count refused) is tried again by the next call; a closed queue refuses every call.
 */

import { ClosedError } from '../errors.js';
import type { ResolvedQueueOptions } from '../options/queue.js';
import { type Connection, checkServer } from '../redis/connection.js';
import { Layout, resolveLayout } from './partitions.js';

export class LayoutOpener {
  /** Known at construction for a numeric `partitions`; read from Redis on first use for 'auto'. */
  layout: Layout | null;
  closed = false;
  private opened: Promise<Layout> | null = null;

  constructor(
    private readonly name: string,
    private readonly options: ResolvedQueueOptions,
    private readonly conn: Connection,
  ) {
    const { prefix, partitions } = options;
    this.layout = partitions === 0 ? null : new Layout(prefix, name, partitions);
  }

  open(): Promise<Layout> {
    if (this.closed) return Promise.reject(new ClosedError(`Queue ${this.name}`));
    if (!this.opened) {
      const opening = (async () => {
        await checkServer(this.conn.client, this.options.strict, this.options.logger);
        const { prefix, partitions } = this.options;
        this.layout = await resolveLayout(this.conn.client, prefix, this.name, partitions);
        return this.layout;
      })();
      opening.catch(() => {
        if (this.opened === opening) this.opened = null;
      });
      this.opened = opening;
    }
    return this.opened;
  }

  /** Checks again on the next call (after obliterate deleted the recorded partition count). */
  forget(): void {
    this.opened = null;
  }
}
