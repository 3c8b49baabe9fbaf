/** Loads an adapter by name; each library is imported only by the process that needs it. */
import type { Adapter, LibName } from './types.js';

export async function loadAdapter(lib: LibName): Promise<Adapter> {
  switch (lib) {
    case 'surety':
      return (await import('./surety.js')).surety;
    case 'bullmq':
      return (await import('./bullmq.js')).bullmq;
    case 'beequeue':
      return (await import('./beequeue.js')).beequeue;
  }
}
