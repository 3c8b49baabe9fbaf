// @ts-check
/**
 * A job (#/queue/NAME/job/ID): its record, errors, logs and actions.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function jobView(name, id) {
  var base = `/queues/${enc(name)}/jobs/${enc(id)}`;
  // The explanation is a second read: when it fails (the job removed meanwhile), the job still shows.
  var why = api(`${base}/explain`).then(
    (x) => x.reasons,
    (err) => err,
  );
  // The flow around it (queue.flow), a third read that may fail alone as the explanation may.
  var flow = api(`${base}/flow`).then(
    (f) => f,
    (err) => err,
  );
  // Which worker runs it (from the workers' heartbeats), shown for a running job.
  var running = api(`/queues/${enc(name)}/workers`).then(
    (r) => r.workers.filter((w) => w.activeJobIds.indexOf(id) >= 0)[0] || null,
    () => null,
  );
  return Promise.all([api(base), why, running, flow]).then(([j, reasons, worker, graph]) => {
    var finished = j.state === 'completed' || j.state === 'dead';
    var fields = [
      ['state', badge(j.state)],
      ['name', j.name ?? ''],
      [
        'attempts',
        j.state === 'completed' || j.state === 'dead'
          ? `${j.attempts} started, of at most ${j.maxAttempts}`
          : `${j.attempts} started, ${j.attemptsLeft} of ${j.maxAttempts} left`,
      ],
      ['snoozes', j.snoozes || ''],
      ['priority', j.priority],
      ['group', j.group ? el('a', { href: groupHref(name, j.group), text: j.group }) : ''],
      ['batch', j.batch ? el('a', { id: 'job-batch', href: batchHref(name, j.batch), text: j.batch }) : ''],
      ['created', ago(j.createdAt)],
      ['run at', ago(j.runAt)],
      ['expires', ago(j.expireAt)],
      ['started', ago(j.startedAt)],
      [
        j.state === 'active' ? 'running for' : 'finished',
        j.state === 'active' && j.startedAt
          ? el('span', { 'data-since': j.startedAt, text: dur(Date.now() - j.startedAt) })
          : ago(j.finishedAt),
      ],
      [
        'worker',
        j.state === 'active' && worker
          ? el('span', { id: 'job-worker', title: worker.id, text: `${worker.host}:${worker.pid}` })
          : '',
      ],
      ['depends on', j.dependsOn.join(', ')],
    ];
    var actions = el(
      'div',
      { class: 'bar' },
      finished ? act('Retry', `${base}/retry`, { name: 'retry' }) : null,
      j.state === 'delayed' ? act('Promote', `${base}/promote`, { name: 'promote' }) : null,
      !finished ? act('Cancel', `${base}/cancel`, { name: 'cancel', danger: true }) : null,
      j.state !== 'active'
        ? act('Remove', `${base}/remove`, {
            name: 'remove',
            danger: true,
            done: () => {
              location.hash = queueHref(name, j.state);
              return `removed ${id}`;
            },
          })
        : null,
    );
    if (!finished && !timer)
      timer = setTimeout(() => {
        timer = null;
        render();
      }, 1000);
    return [
      el('div', { class: 'muted' }, el('a', { href: queueHref(name, j.state), text: name }), ' / job'),
      el('h1', { id: 'job-id', text: j.id }),
      actions,
      el(
        'dl',
        null,
        fields.map((f) => [
          el('dt', { text: f[0] }),
          el('dd', null, f[1] === undefined ? '' : typeof f[1] === 'object' ? f[1] : String(f[1])),
        ]),
      ),
      el('h2', { text: "Why isn't it running?" }),
      whyList(reasons),
      flowSection(graph),
      el('h2', { text: 'Data' }),
      el('pre', { id: 'job-data', text: pretty(j.data) }),
      'result' in j
        ? [el('h2', { text: 'Result' }), el('pre', { id: 'job-result', text: pretty(j.result) })]
        : null,
      'progress' in j ? [el('h2', { text: 'Progress' }), el('pre', { text: pretty(j.progress) })] : null,
      j.steps
        ? [
            el('h2', { text: `Steps (${Object.keys(j.steps).length})` }),
            el('pre', { id: 'job-steps', text: pretty(j.steps) }),
          ]
        : null,
      el('h2', { text: `Errors (${j.errors.length})` }),
      j.errors.map((e) =>
        el(
          'div',
          { class: 'err' },
          el(
            'div',
            null,
            el('strong', { text: `attempt ${e.attempt}: ${e.name}${e.code ? ` [${e.code}]` : ''}` }),
            ' ',
            el('span', { class: 'muted' }, ago(e.at)),
          ),
          el('div', { text: e.message }),
          e.stack ? el('pre', { text: e.stack }) : null,
        ),
      ),
      el('h2', { text: `Logs (${j.logs.length})` }),
      j.logs.length
        ? el('pre', { id: 'job-logs', text: j.logs.join('\n') })
        : el('p', { class: 'muted', text: 'No log lines.' }),
    ];
  });
}

/**
 * The reasons of queue.explain (GET .../explain): code, message, and every other field as data, so
 * reason codes and fields the library adds later show without a change here.
 */
function whyList(reasons) {
  if (reasons instanceof Error) return el('p', { class: 'flash bad', text: reasons.message });
  if (!reasons.length) return el('p', { class: 'muted', text: 'No reason reported.' });
  return el(
    'ul',
    { id: 'job-why' },
    reasons.map((r) => {
      var details = reasonDetails(r);
      return el(
        'li',
        { 'data-reason': r.code },
        el('strong', { text: r.code }),
        ' ',
        el('span', { text: r.message }),
        details ? [' ', el('span', { class: 'muted', text: `[${details}]` })] : null,
      );
    }),
  );
}
function reasonDetails(r) {
  return Object.keys(r)
    .filter((k) => k !== 'code' && k !== 'message' && r[k] !== undefined && r[k] !== null)
    .map((k) =>
      k === 'until' && typeof r[k] === 'number'
        ? `until ${time(r[k])}`
        : `${k} ${Array.isArray(r[k]) ? r[k].join(', ') : typeof r[k] === 'object' ? JSON.stringify(r[k]) : r[k]}`,
    )
    .join('; ');
}

function batchHref(name, id) {
  return `#/queue/${enc(name)}/batch/${enc(id)}`;
}

/** A batch (#/queue/NAME/batch/ID): its counts, its dead members and its callback job (queue.batch). */
function batchView(name, id) {
  return api(`/queues/${enc(name)}/batches/${enc(id)}`).then((b) => {
    var done = b.finishedAt !== undefined;
    if (!done && !timer)
      timer = setTimeout(() => {
        timer = null;
        render();
      }, 1000);
    var jobLink = (jid) => el('a', { href: jobHref(name, jid), text: jid });
    var fields = [
      ['state', done ? 'finished' : 'running'],
      ['progress', `${b.total - b.pending} of ${b.total} finished`],
      ['completed', b.completed],
      ['dead', b.dead],
      ['pending', b.pending],
      ['created', ago(b.createdAt)],
      ['finished', ago(b.finishedAt)],
      ['callback', b.callbackId ? jobLink(b.callbackId) : ''],
    ];
    return [
      el('div', { class: 'muted' }, el('a', { href: queueHref(name, 'waiting'), text: name }), ' / batch'),
      el('h1', { id: 'batch-id', text: b.id }),
      el(
        'dl',
        { id: 'batch-fields' },
        fields.map((f) => [
          el('dt', { text: f[0] }),
          el('dd', null, typeof f[1] === 'object' ? f[1] : String(f[1] ?? '')),
        ]),
      ),
      b.deadIds.length > 0
        ? [
            el('h2', { text: `Dead members (first ${b.deadIds.length} of ${b.dead})` }),
            el(
              'p',
              null,
              b.deadIds.map((d, i) => [i > 0 ? ', ' : '', jobLink(d)]),
            ),
          ]
        : null,
    ];
  });
}
