// @ts-check
/**
 * The overview (#/): the Redis panel, then every queue with its live counts, latency (how long the
 * oldest waiting job has waited), throughput (completed per minute, last 5 min), and charts over the
 * chosen range (1 h, 6 h, 24 h, 7 d: ranges beyond the queues' metrics retention are disabled).
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function overview() {
  var rows = (latest || []).map((q) => {
    var st = stats[q.name];
    var oldest = st?.oldestWaiting;
    return el(
      'tr',
      { 'data-queue': q.name },
      el(
        'td',
        null,
        el('a', { href: queueHref(q.name, 'waiting'), text: q.name }),
        q.paused ? [' ', badge('paused')] : null,
      ),
      STATES.map((s) =>
        el(
          'td',
          { class: 'num', 'data-count': s },
          el('a', { href: queueHref(q.name, s), text: q.counts[s] }),
        ),
      ),
      el('td', { class: 'num', text: q.workers }),
      el(
        'td',
        { class: 'num', 'data-latency': oldest ? oldest.ageMs : '' },
        !st
          ? el('span', { class: 'muted', text: '...' })
          : oldest
            ? el('a', {
                href: jobHref(q.name, oldest.id),
                title: `oldest waiting job: ${oldest.id}`,
                text: dur(oldest.ageMs),
              })
            : '-',
      ),
      el('td', {
        class: 'num',
        'data-rate': st ? st.completedPerMinute : '',
        text: st ? rate(st.completedPerMinute) : '',
      }),
      el(
        'td',
        { class: 'spark' },
        charts[q.name]
          ? throughputChart(charts[q.name])
          : el('span', { class: 'muted', text: q.name in charts ? 'n/a' : '...' }),
      ),
      el('td', { class: 'spark' }, charts[q.name] ? failureChart(charts[q.name]) : null),
    );
  });
  return [
    redisPanel(redisInfo),
    el('h1', { text: 'Queues' }),
    latest === null
      ? el('p', { class: 'muted', text: 'loading...' })
      : rows.length === 0
        ? el('p', { class: 'muted', text: 'No queues under this prefix yet.' })
        : [
            rangePicker(),
            table(
              'queues',
              [
                'queue',
                ...STATES.map((s) => el('th', { class: 'num', text: s })),
                el('th', { class: 'num', text: 'workers' }),
                el('th', { class: 'num', title: 'age of the oldest waiting job', text: 'latency' }),
                el('th', { class: 'num', title: 'completed jobs per minute, last 5 min', text: 'done/min' }),
                el('th', { title: `completed jobs per bucket, last ${range}`, text: `throughput, ${range}` }),
                el('th', {
                  title: `failed / (completed + failed) attempts per bucket, last ${range}`,
                  text: `failure rate, ${range}`,
                }),
              ],
              rows,
            ),
          ],
  ];
}
function rate(perMinute) {
  return perMinute >= 10 ? String(Math.round(perMinute)) : String(Math.round(perMinute * 10) / 10);
}
// The chart range: buttons, those beyond the longest metrics retention of the listed queues disabled.
function rangePicker() {
  var kept = Object.keys(charts).reduce(
    (m, n) => Math.max(m, charts[n] ? charts[n].retentionMs || 0 : 0),
    3600000,
  );
  return el(
    'div',
    { class: 'bar', id: 'range', role: 'group', 'aria-label': 'chart range' },
    el('span', { class: 'muted', text: 'charts:' }),
    Object.keys(RANGES).map((k) =>
      el('button', {
        type: 'button',
        'data-range': k,
        class: k === range ? 'on' : null,
        'aria-pressed': k === range ? 'true' : 'false',
        disabled: RANGES[k][0] > kept,
        title:
          RANGES[k][0] > kept
            ? `beyond the metrics retention (${dur(kept)}): queue.setMetricsRetention`
            : null,
        text: k,
        onclick: () => {
          range = k;
          charts = {};
          chartsAt = 0;
          render();
          refreshCharts();
        },
      }),
    ),
  );
}
