/**
 * Yields the values of several async iterators as each produces them (a partitioned queue's event
 * streams, read one per partition). Ends when all have ended; the first error ends the merge, and
 * ending the merge early (break) returns every source so they release their connections.
 */
export async function* mergeIterators<T>(sources: AsyncIterator<T>[]): AsyncGenerator<T> {
  if (sources.length === 1) {
    // The common case (one partition): no bookkeeping.
    const only = sources[0]!;
    try {
      for (;;) {
        const r = await only.next();
        if (r.done) return;
        yield r.value;
      }
    } finally {
      await only.return?.();
    }
  }
  const pending = new Map<number, Promise<{ i: number; r: IteratorResult<T> }>>();
  const pull = (i: number) =>
    pending.set(
      i,
      sources[i]!.next().then((r) => ({ i, r })),
    );
  for (let i = 0; i < sources.length; i++) pull(i);
  try {
    while (pending.size > 0) {
      const { i, r } = await Promise.race(pending.values());
      if (r.done) {
        pending.delete(i);
        continue;
      }
      pull(i);
      yield r.value;
    }
  } finally {
    await Promise.all(sources.map((s) => s.return?.(undefined).catch(() => {})));
  }
}
