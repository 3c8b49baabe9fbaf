// @ts-check
/**
 * A queue's job list (a page, or search results): one row per job with its own actions, checkboxes
 * with select-all, and bulk actions on the selection (POST /api/queues/:q/bulk/:action, at most
 * BULK_MAX ids a call; the answer has a result per id). Active jobs show when they started, how long
 * they have run and the worker running them.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
var BULK_MAX = 100;
// The actions a job in `state` allows (the library refuses the others with ERR_INVALID_STATE).
function actionsFor(state) {
  return [
    state === 'completed' || state === 'dead' ? 'retry' : null,
    state === 'delayed' ? 'promote' : null,
    state !== 'completed' && state !== 'dead' ? 'cancel' : null,
    state !== 'active' ? 'remove' : null,
  ].filter(Boolean);
}
function jobCells(state, j) {
  if (state === 'active')
    return [
      el('td', null, ago(j.startedAt)),
      el('td', {
        class: 'num',
        'data-since': j.startedAt,
        text: j.startedAt ? dur(Date.now() - j.startedAt) : '',
      }),
      el(
        'td',
        { 'data-worker': j.worker ? j.worker.id : '' },
        j.worker ? el('span', { title: j.worker.id, text: `${j.worker.host}:${j.worker.pid}` }) : '',
      ),
    ];
  var last = j.errors.length ? j.errors[j.errors.length - 1] : null;
  return [
    el('td', null, ago(j.createdAt)),
    el('td', null, ago(state === 'completed' || state === 'dead' ? j.finishedAt : j.runAt)),
    el('td', { class: 'wrap', text: last ? last.message : '' }),
  ];
}
function jobsTable(name, state, jobs) {
  var actions = actionsFor(state);
  var boxes = [];
  var count = el('span', { class: 'muted', id: 'selected-count', text: '0 selected' });
  var bulkButtons = actions.map((a) =>
    el('button', {
      type: 'button',
      'data-bulk': a,
      class: a === 'remove' || a === 'cancel' ? 'danger' : null,
      disabled: true,
      text: `${a[0].toUpperCase()}${a.slice(1)} selected`,
      onclick: () =>
        bulk(
          name,
          a,
          boxes.filter((b) => b.checked).map((b) => b.value),
        ),
    }),
  );
  var all = el('input', {
    type: 'checkbox',
    id: 'select-all',
    'aria-label': 'select all jobs on this page',
    onchange: () => {
      boxes.forEach((b) => {
        b.checked = all.checked;
      });
      sync();
    },
  });
  function sync() {
    var n = boxes.filter((b) => b.checked).length;
    count.textContent = `${n} selected`;
    all.checked = n > 0 && n === boxes.length;
    bulkButtons.forEach((b) => {
      b.disabled = n === 0 || n > BULK_MAX;
    });
  }
  var rows = jobs.map((j) => {
    var box = el('input', { type: 'checkbox', value: j.id, 'aria-label': `select ${j.id}`, onchange: sync });
    boxes.push(box);
    return el(
      'tr',
      { 'data-job': j.id },
      RO ? null : el('td', { class: 'pick' }, box),
      el('td', { class: 'id' }, el('a', { href: jobHref(name, j.id), text: j.id })),
      // Attempts made and the budget left: `attempts/maxAttempts` read 4/2 after a manual retry.
      el('td', {
        class: 'num',
        text:
          state === 'completed' || state === 'dead'
            ? `${j.attempts}`
            : `${j.attempts} (${j.attemptsLeft} left)`,
      }),
      jobCells(state, j),
      RO
        ? null
        : el(
            'td',
            { class: 'row-actions' },
            actions.map((a) =>
              act(`${a[0].toUpperCase()}${a.slice(1)}`, `/queues/${enc(name)}/jobs/${enc(j.id)}/${a}`, {
                name: a,
                danger: a === 'remove' || a === 'cancel',
              }),
            ),
          ),
    );
  });
  var headers = [
    RO ? null : el('th', { class: 'pick' }, all),
    'id',
    el('th', { class: 'num', text: 'attempts' }),
    ...(state === 'active'
      ? ['started', el('th', { class: 'num', text: 'running for' }), 'worker']
      : ['created', state === 'completed' || state === 'dead' ? 'finished' : 'run at', 'last error']),
    RO ? null : 'actions',
  ].filter(Boolean);
  return [
    RO || jobs.length === 0 || actions.length === 0
      ? null
      : el('div', { class: 'bar', id: 'bulk' }, count, bulkButtons),
    table('jobs', headers, rows),
  ];
}
function bulk(name, action, ids) {
  if (ids.length === 0) return;
  var q = ids.map((id) => `id=${enc(id)}`).join('&');
  post(`/queues/${enc(name)}/bulk/${action}?${q}`).then(
    (r) => {
      var failed = r.results.filter((x) => !x.ok);
      say(
        `${action}: ${r.results.length - failed.length} done${
          failed.length
            ? `, ${failed.length} failed (${failed.map((f) => `${f.id}: ${f.code}`).join('; ')})`
            : ''
        }`,
        failed.length > 0,
      );
      render();
    },
    (err) => say(err.message, true),
  );
}
