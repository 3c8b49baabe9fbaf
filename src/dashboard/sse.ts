/**
 * `GET /api/events`: a Server-Sent Events stream of every queue's overview (counts, paused, workers),
 * sent at once and then every `intervalMs`. It stops when the client goes away (request aborted or
 * stream cancelled) or the dashboard closes; `onStop` is called then, once.
 */
import type { QueueRegistry } from './queues.js';

export function eventStream(
  req: Request,
  queues: QueueRegistry,
  intervalMs: number,
  closing: AbortSignal,
  onStop: () => void = () => {},
): Response {
  const encoder = new TextEncoder();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let end: () => void = () => {};
  const stop = () => {
    if (stopped) return;
    stopped = true;
    clearTimeout(timer);
    // `closing` lives as long as the dashboard: a listener left on it would pile up per stream.
    req.signal.removeEventListener('abort', end);
    closing.removeEventListener('abort', end);
    onStop();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      end = () => {
        if (stopped) return;
        stop();
        try {
          controller.close();
        } catch {
          // already closed by the consumer
        }
      };
      req.signal.addEventListener('abort', end, { once: true });
      closing.addEventListener('abort', end, { once: true });
      if (req.signal.aborted || closing.aborted) return end();
      const tick = async () => {
        if (stopped) return;
        try {
          const payload = { at: Date.now(), queues: await queues.recentOverviews(intervalMs / 2) };
          if (stopped) return;
          controller.enqueue(encoder.encode(`event: queues\ndata: ${JSON.stringify(payload)}\n\n`));
        } catch (err) {
          if (stopped) return;
          const message = err instanceof Error ? err.message : String(err);
          controller.enqueue(encoder.encode(`event: failure\ndata: ${JSON.stringify({ message })}\n\n`));
        }
        if (!stopped) timer = setTimeout(tick, intervalMs);
      };
      controller.enqueue(encoder.encode(`retry: ${intervalMs}\n\n`));
      void tick();
    },
    cancel: stop,
  });
  return new Response(body, {
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  });
}
