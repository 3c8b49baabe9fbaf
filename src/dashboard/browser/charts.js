// @ts-check
/**
 * The overview's per-queue charts: SVG bars built with createElementNS from numbers only, from
 * GET /api/queues/:q/metrics over the chosen range (refreshed every CHART_MS), with each queue's
 * stats (GET /api/queues/:q/stats) and the Redis panel's GET /api/redis.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
// A bar per bucket; values are numbers (null: no bar), scaled to max. label: the tooltip and aria-label.
function chart(kind, values, max, label) {
  var w = CW / Math.max(values.length, 1),
    title = svg('title', {});
  title.textContent = label;
  var bars = values.map((v, i) => {
    if (v === null || !(v > 0) || !(max > 0)) return null;
    var h = Math.max(1, Math.round((v / max) * (CH - 2)));
    return svg('rect', {
      x: (i * w).toFixed(2),
      y: CH - 1 - h,
      width: Math.max(w - 0.4, 0.6).toFixed(2),
      height: h,
    });
  });
  return svg(
    'svg',
    {
      class: `chart ${kind}`,
      'data-chart': kind,
      width: CW,
      height: CH,
      viewBox: `0 0 ${CW} ${CH}`,
      role: 'img',
      'aria-label': label,
    },
    title,
    svg('line', { class: 'axis', x1: 0, y1: CH - 0.5, x2: CW, y2: CH - 0.5 }),
    bars.filter(Boolean),
  );
}
function throughputChart(m) {
  var done = m.buckets.map((b) => Number(b.completed) || 0);
  var peak = Math.max.apply(null, done.concat([0]));
  var per = m.bucketMs === 60000 ? 'min' : dur(m.bucketMs);
  return [
    chart(
      'throughput',
      done,
      peak,
      `${Number(m.completed) || 0} completed in the last ${range}, peak ${peak}/${per}`,
    ),
    el('span', {
      class: 'muted',
      'data-total': 'completed',
      text: range === '1h' ? ` ${Number(m.completed) || 0}/h` : ` ${Number(m.completed) || 0} in ${range}`,
    }),
  ];
}
function failureChart(m) {
  var rates = m.buckets.map((b) => {
    var c = Number(b.completed) || 0,
      f = Number(b.failed) || 0;
    return c + f > 0 ? f / (c + f) : null;
  });
  var c = Number(m.completed) || 0,
    f = Number(m.failed) || 0;
  var pct = c + f > 0 ? `${Math.round((f / (c + f)) * 1000) / 10}%` : '-';
  return [
    chart('failure', rates, 1, `${f} failed of ${c + f} attempts in the last ${range} (${pct})`),
    el('span', { class: 'muted', 'data-total': 'failure', text: ` ${pct}` }),
  ];
}
function refreshCharts() {
  if (chartsBusy || current !== 'overview' || !latest) return;
  var stale = Date.now() - chartsAt >= CHART_MS;
  var names = latest.map((q) => q.name).filter((n) => stale || !(n in charts));
  if (names.length === 0) return;
  chartsBusy = true;
  var r = RANGES[range];
  Promise.all([
    ...names.map((n) =>
      Promise.all([
        api(`/queues/${enc(n)}/metrics?windowMs=${r[0]}&bucketMs=${r[1]}`).then(
          (m) => {
            charts[n] = m;
          },
          () => {
            charts[n] = null;
          },
        ),
        api(`/queues/${enc(n)}/stats`).then(
          (s) => {
            stats[n] = s;
          },
          () => {
            delete stats[n];
          },
        ),
      ]),
    ),
    stale
      ? api('/redis').then(
          (i) => {
            redisInfo = i;
          },
          (err) => {
            redisInfo = err;
          },
        )
      : null,
  ]).then(() => {
    chartsBusy = false;
    if (stale) chartsAt = Date.now();
    if (current === 'overview') render();
  });
}
