// @ts-check
/**
 * The overview (#/): every queue with its live counts, charts and pause/resume.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function overview() {
  var rows = (latest || []).map((q) =>
    el(
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
        { class: 'spark' },
        charts[q.name]
          ? throughputChart(charts[q.name])
          : el('span', { class: 'muted', text: q.name in charts ? 'n/a' : '...' }),
      ),
      el('td', { class: 'spark' }, charts[q.name] ? failureChart(charts[q.name]) : null),
    ),
  );
  return [
    el('h1', { text: 'Queues' }),
    latest === null
      ? el('p', { class: 'muted', text: 'loading...' })
      : rows.length === 0
        ? el('p', { class: 'muted', text: 'No queues under this prefix yet.' })
        : table(
            'queues',
            [
              'queue',
              ...STATES.map((s) => el('th', { class: 'num', text: s })),
              el('th', { class: 'num', text: 'workers' }),
              el('th', { title: 'completed jobs per minute, last hour', text: 'throughput, 1 h' }),
              el('th', {
                title: 'failed / (completed + failed) attempts per minute, last hour',
                text: 'failure rate, 1 h',
              }),
            ],
            rows,
          ),
  ];
}
