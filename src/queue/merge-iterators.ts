/**
 * Yields the values of several async iterators as each produces them (a partitioned queue's event
 * streams, read one per partition). Ends when all have ended; the first error ends the merge.
 * Ending the merge early (break) asks every source to return; the caller must also abort reads that
 * are blocked (queue.events() disconnects their clients).
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
    // Not awaited: a source blocked in a read ends only when its owner aborts it (which happens
    // after this generator returns), so waiting here would deadlock.
    for (const s of sources) s.return?.(undefined).catch(() => {});
  }
}
