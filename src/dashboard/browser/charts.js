// @ts-check
/**
 * The overview's per-queue charts: SVG bars built with createElementNS from numbers only, from
 * GET /api/queues/:q/metrics (refreshed every CHART_MS).
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
  return [
    chart(
      'throughput',
      done,
      peak,
      `${Number(m.completed) || 0} completed in the last hour, peak ${peak}/min`,
    ),
    el('span', { class: 'muted', 'data-total': 'completed', text: ` ${Number(m.completed) || 0}/h` }),
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
    chart('failure', rates, 1, `${f} failed of ${c + f} attempts in the last hour (${pct})`),
    el('span', { class: 'muted', 'data-total': 'failure', text: ` ${pct}` }),
  ];
}
function refreshCharts() {
  if (chartsBusy || current !== 'overview' || !latest) return;
  var stale = Date.now() - chartsAt >= CHART_MS;
  var names = latest.map((q) => q.name).filter((n) => stale || !(n in charts));
  if (names.length === 0) return;
  chartsBusy = true;
  Promise.all(
    names.map((n) =>
      api(`/queues/${enc(n)}/metrics`).then(
        (m) => {
          charts[n] = m;
        },
        () => {
          charts[n] = null;
        },
      ),
    ),
  ).then(() => {
    chartsBusy = false;
    if (stale) chartsAt = Date.now();
    if (current === 'overview') render();
  });
}
