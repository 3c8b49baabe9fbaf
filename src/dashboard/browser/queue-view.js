// @ts-check
/**
 * A queue (#/queue/NAME): state tabs with live counts, a page of jobs, and the queue's actions
 * (pause/resume, retry dead, clean), workers, flow control (groups-view.js) and schedules.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function queueView(name, params) {
  var state = STATES.indexOf(params.get('state')) >= 0 ? params.get('state') : 'waiting';
  var offset = Math.max(0, parseInt(params.get('offset') || '0', 10) || 0);
  var query = params.get('q') || '';
  return Promise.all([
    api(`/queues/${enc(name)}`),
    query
      ? api(`/queues/${enc(name)}/search?state=${state}&${searchParams(query)}&scan=${SEARCH_SCAN}`)
      : api(`/queues/${enc(name)}/jobs?state=${state}&order=desc&offset=${offset}&limit=${PAGE}`),
    api(`/queues/${enc(name)}/workers`),
    api(`/queues/${enc(name)}/schedules`),
    api(`/queues/${enc(name)}/groups?limit=20`),
    api(`/queues/${enc(name)}/limits`),
  ]).then((r) => {
    var q = r[0],
      page = r[1],
      workers = r[2].workers,
      schedules = r[3].schedules;
    var search = el('input', { name: 'id', placeholder: 'job id', 'aria-label': 'job id' });
    var form = el(
      'form',
      {
        class: 'bar',
        id: 'job-search',
        onsubmit: (e) => {
          e.preventDefault();
          if (search.value) location.hash = jobHref(name, search.value.trim());
        },
      },
      search,
      el('button', { type: 'submit', text: 'Open job' }),
    );
    return [
      el('h1', null, name, ' ', q.paused ? badge('paused') : null),
      el(
        'div',
        { class: 'bar' },
        q.paused
          ? act('Resume', `/queues/${enc(name)}/resume`, { name: 'resume' })
          : act('Pause', `/queues/${enc(name)}/pause`, { name: 'pause' }),
        q.counts.dead > 0
          ? act('Retry all dead', `/queues/${enc(name)}/retry-dead`, {
              name: 'retry-dead',
              danger: true,
              done: (o) =>
                `retried ${o.done.length} dead jobs${o.failed.length ? `, ${o.failed.length} failed` : ''}`,
            })
          : null,
        q.counts.waiting + q.counts.delayed > 0
          ? act('Drain', `/queues/${enc(name)}/drain`, {
              name: 'drain',
              danger: true,
              done: (o) => `drained: removed ${o.removed} waiting and delayed jobs`,
            })
          : null,
        form,
      ),
      el(
        'nav',
        { class: 'tabs' },
        STATES.map((s) =>
          el(
            'a',
            { href: queueHref(name, s), class: s === state ? 'on' : null, 'data-tab': s },
            `${s} `,
            el('span', { 'data-count': s, text: q.counts[s] }),
          ),
        ),
      ),
      dataSearch(name, state, query, q.counts[state]),
      cleanBar(name, state, page.total),
      jobsTable(name, state, page.jobs),
      query ? searchSummary(state, page) : pager(name, state, offset, page),
      el('h2', { text: `Workers (${workers.length})` }),
      workers.length === 0
        ? el('p', { class: 'muted', text: 'No live workers.' })
        : table(
            'workers',
            ['id', 'host', 'pid', 'concurrency', 'active jobs', 'started', 'last beat'],
            workers.map((w) =>
              el(
                'tr',
                null,
                el('td', { text: w.id }),
                el('td', { text: w.host }),
                el('td', { text: w.pid }),
                el('td', { class: 'num', text: w.concurrency }),
                el('td', { text: w.activeJobIds.join(', ') }),
                el('td', null, ago(w.startedAt)),
                el('td', null, ago(w.lastBeat)),
              ),
            ),
          ),
      groupsPanel(name, r[4], r[5]),
      el('h2', { text: `Schedules (${schedules.length})` }),
      schedules.length === 0
        ? el('p', { class: 'muted', text: 'No schedules.' })
        : table(
            'schedules',
            ['key', 'timing', 'next run', 'runs', 'bounds', 'pending job'],
            schedules.map((s) =>
              el(
                'tr',
                null,
                el('td', { text: s.key }),
                el('td', { text: s.cron ? `${s.cron} (${s.tz || 'UTC'})` : `every ${s.everyMs} ms` }),
                el('td', null, s.ended ? 'ended' : ago(s.nextRunAt)),
                el('td', { text: s.limit === undefined ? String(s.count) : `${s.count}/${s.limit}` }),
                el('td', { text: scheduleBounds(s) }),
                el(
                  'td',
                  null,
                  s.pendingJobId
                    ? el('a', { href: jobHref(name, s.pendingJobId), text: s.pendingJobId })
                    : null,
                ),
              ),
            ),
          ),
    ];
  });
}

// Clean: removes the completed or dead jobs older than the chosen age (10 000 at most per click).
function cleanBar(name, state, total) {
  if (RO || total === 0 || (state !== 'completed' && state !== 'dead')) return null;
  var age = el(
    'select',
    { name: 'olderThanMs', 'aria-label': 'older than' },
    [
      ['0', 'all'],
      ['3600000', 'older than 1 h'],
      ['86400000', 'older than 1 day'],
      ['604800000', 'older than 7 days'],
    ].map((o) => el('option', { value: o[0], text: o[1] })),
  );
  return el(
    'div',
    { class: 'bar' },
    act('Clean', () => `/queues/${enc(name)}/clean?state=${state}&olderThanMs=${enc(age.value)}`, {
      name: 'clean',
      danger: true,
      done: (o) => `removed ${o.removed} ${state} jobs${o.more ? ' (more left: clean again)' : ''}`,
    }),
    age,
  );
}

// A schedule's bounds (startAt, endAt, immediately), or '-' when it has none.
function scheduleBounds(s) {
  var parts = [];
  if (s.startAt !== undefined) parts.push(`from ${time(s.startAt)}`);
  if (s.endAt !== undefined) parts.push(`until ${time(s.endAt)}`);
  if (s.immediately) parts.push('immediately');
  return parts.length ? parts.join(' ') : '-';
}

// Newest first: "Newer" goes back towards offset 0, "Older" onwards; "1-25 of N" counts from the newest.
function pager(name, state, offset, page) {
  return el(
    'div',
    { class: 'bar', id: 'pager' },
    offset > 0
      ? el('a', { href: queueHref(name, state, Math.max(0, offset - PAGE)), rel: 'prev', text: '< Newer' })
      : null,
    el('span', {
      class: 'muted',
      id: 'page-range',
      text:
        page.total === 0
          ? 'none'
          : `${offset + 1}-${offset + page.jobs.length} of ${page.total}, newest first`,
    }),
    offset + PAGE < page.total
      ? el('a', { href: queueHref(name, state, offset + PAGE), rel: 'next', text: 'Older >' })
      : null,
  );
}
