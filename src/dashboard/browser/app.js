// @ts-check
/**
 * The dashboard page's script: plain browser JavaScript, served as it is (no bundler), inline in the
 * page under the CSP nonce as a module script (page.ts reads this file once). Linted by biome and
 * type-checked against the DOM by `tsc -p src/dashboard/browser` (part of `npm run typecheck`).
 * Hash routes: #/ (every queue), #/queue/NAME?state=dead&offset=0, #/queue/NAME/job/ID.
 * Every piece of data goes into the DOM through text nodes (el() below); nothing is parsed as HTML.
 * The overview's charts are SVG built with createElementNS from numbers only (svg() and chart() below).
 * The list of states comes from the page (meta surety-states, rendered from JOB_STATES).
 */
(() => {
  var meta = (n) => document.querySelector(`meta[name="${n}"]`).getAttribute('content');
  // The page is served at the mount point itself, so its path is the API's base (any framework, any prefix).
  var BASE = location.pathname.replace(/\/+$/, ''),
    CSRF = meta('surety-csrf'),
    RO = meta('surety-read-only') === 'true';
  var STATES = meta('surety-states').split(',');
  var PAGE = 25;
  var view = document.getElementById('view'),
    flash = document.getElementById('flash'),
    liveEl = document.getElementById('live');
  var enc = encodeURIComponent;
  var latest = null,
    current = null,
    timer = null,
    generation = 0;
  // Per-queue metrics of the last hour (GET /api/queues/:q/metrics), refreshed every CHART_MS on the overview.
  var CHART_MS = 10000,
    CW = 120,
    CH = 26,
    SVGNS = 'http://www.w3.org/2000/svg';
  var charts = {},
    chartsAt = 0,
    chartsBusy = false;

  function el(tag, props, ...children) {
    var e = document.createElement(tag);
    if (props)
      Object.keys(props).forEach((k) => {
        var v = props[k];
        if (v === undefined || v === null || v === false) return;
        if (k === 'text') e.textContent = String(v);
        else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, String(v));
      });
    var add = (c) => {
      if (c === null || c === undefined || c === false) return;
      if (Array.isArray(c)) c.forEach(add);
      else e.append(c);
    };
    for (const c of children) add(c);
    return e;
  }
  function svg(tag, attrs, ...children) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach((k) => {
      e.setAttribute(k, String(attrs[k]));
    });
    var add = (c) => {
      if (Array.isArray(c)) c.forEach(add);
      else if (c) e.append(c);
    };
    for (const c of children) add(c);
    return e;
  }
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
  function time(ms) {
    return ms
      ? new Date(ms)
          .toISOString()
          .replace('T', ' ')
          .replace(/\.\d+Z$/, 'Z')
      : '';
  }
  function pretty(v) {
    return v === undefined ? '' : JSON.stringify(v, null, 2);
  }
  function say(msg, bad) {
    flash.textContent = msg;
    flash.className = bad ? 'flash bad' : 'flash';
  }
  function api(path, opts) {
    return fetch(`${BASE}/api${path}`, opts).then((res) =>
      res
        .json()
        .catch(() => ({}))
        .then((body) => {
          if (!res.ok)
            throw new Error(body.error ? `${body.error.code}: ${body.error.message}` : res.statusText);
          return body;
        }),
    );
  }
  function post(path) {
    return api(path, { method: 'POST', headers: { 'x-surety-csrf': CSRF } });
  }
  function act(label, path, opts) {
    opts = opts || {};
    var armed = false;
    var b = el('button', {
      type: 'button',
      class: opts.danger ? 'danger' : null,
      'data-action': opts.name || label,
      text: label,
    });
    b.addEventListener('click', () => {
      if (opts.danger && !armed) {
        armed = true;
        b.textContent = `Confirm ${label.toLowerCase()}`;
        return;
      }
      b.disabled = true;
      post(typeof path === 'function' ? path() : path).then(
        (r) => {
          say(opts.done ? opts.done(r) : `${label}: done`);
          render();
        },
        (err) => {
          say(err.message, true);
          b.disabled = false;
        },
      );
    });
    return RO ? null : b;
  }
  function badge(state) {
    return el('span', { class: `badge ${state}`, 'data-state': state, text: state });
  }
  function parse() {
    var h = location.hash.slice(1) || '/',
      q = h.indexOf('?');
    var path = q < 0 ? h : h.slice(0, q),
      params = new URLSearchParams(q < 0 ? '' : h.slice(q + 1));
    return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: params };
  }
  function queueHref(name, state, offset) {
    return `#/queue/${enc(name)}?state=${state}${offset ? `&offset=${offset}` : ''}`;
  }
  function jobHref(name, id) {
    return `#/queue/${enc(name)}/job/${enc(id)}`;
  }

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
          : el(
              'table',
              { id: 'queues' },
              el(
                'thead',
                null,
                el(
                  'tr',
                  null,
                  el('th', { text: 'queue' }),
                  STATES.map((s) => el('th', { class: 'num', text: s })),
                  el('th', { class: 'num', text: 'workers' }),
                  el('th', { title: 'completed jobs per minute, last hour', text: 'throughput, 1 h' }),
                  el('th', {
                    title: 'failed / (completed + failed) attempts per minute, last hour',
                    text: 'failure rate, 1 h',
                  }),
                ),
              ),
              el('tbody', null, rows),
            ),
    ];
  }

  function queueView(name, params) {
    var state = STATES.indexOf(params.get('state')) >= 0 ? params.get('state') : 'waiting';
    var offset = Math.max(0, parseInt(params.get('offset') || '0', 10) || 0);
    return Promise.all([
      api(`/queues/${enc(name)}`),
      api(`/queues/${enc(name)}/jobs?state=${state}&offset=${offset}&limit=${PAGE}`),
      api(`/queues/${enc(name)}/workers`),
      api(`/queues/${enc(name)}/schedules`),
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
          onsubmit: (e) => {
            e.preventDefault();
            if (search.value) location.hash = jobHref(name, search.value.trim());
          },
        },
        search,
        el('button', { type: 'submit', text: 'Open job' }),
      );
      var jobs = page.jobs.map((j) => {
        var last = j.errors.length ? j.errors[j.errors.length - 1] : null;
        return el(
          'tr',
          { 'data-job': j.id },
          el('td', null, el('a', { href: jobHref(name, j.id), text: j.id })),
          el('td', { class: 'num', text: `${j.attempts}/${j.maxAttempts}` }),
          el('td', { text: time(j.createdAt) }),
          el('td', { text: time(j.finishedAt || j.runAt) }),
          el('td', { text: last ? last.message : '' }),
        );
      });
      var pager = el(
        'div',
        { class: 'bar' },
        offset > 0
          ? el('a', { href: queueHref(name, state, Math.max(0, offset - PAGE)), text: '< newer' })
          : null,
        el('span', {
          class: 'muted',
          text: page.total === 0 ? 'none' : `${offset + 1}-${offset + page.jobs.length} of ${page.total}`,
        }),
        offset + PAGE < page.total
          ? el('a', { href: queueHref(name, state, offset + PAGE), text: 'older >' })
          : null,
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
        cleanBar(name, state, page.total),
        el(
          'table',
          { id: 'jobs' },
          el(
            'thead',
            null,
            el(
              'tr',
              null,
              [
                'id',
                'attempts',
                'created',
                state === 'completed' || state === 'dead' ? 'finished' : 'run at',
                'last error',
              ].map((h) => el('th', { text: h })),
            ),
          ),
          el('tbody', null, jobs),
        ),
        pager,
        el('h2', { text: `Workers (${workers.length})` }),
        workers.length === 0
          ? el('p', { class: 'muted', text: 'No live workers.' })
          : el(
              'table',
              { id: 'workers' },
              el(
                'thead',
                null,
                el(
                  'tr',
                  null,
                  ['id', 'host', 'pid', 'concurrency', 'active jobs', 'started', 'last beat'].map((h) =>
                    el('th', { text: h }),
                  ),
                ),
              ),
              el(
                'tbody',
                null,
                workers.map((w) =>
                  el(
                    'tr',
                    null,
                    el('td', { text: w.id }),
                    el('td', { text: w.host }),
                    el('td', { text: w.pid }),
                    el('td', { class: 'num', text: w.concurrency }),
                    el('td', { text: w.activeJobIds.join(', ') }),
                    el('td', { text: time(w.startedAt) }),
                    el('td', { text: time(w.lastBeat) }),
                  ),
                ),
              ),
            ),
        el('h2', { text: `Schedules (${schedules.length})` }),
        schedules.length === 0
          ? el('p', { class: 'muted', text: 'No schedules.' })
          : el(
              'table',
              { id: 'schedules' },
              el(
                'thead',
                null,
                el(
                  'tr',
                  null,
                  ['key', 'timing', 'next run', 'pending job'].map((h) => el('th', { text: h })),
                ),
              ),
              el(
                'tbody',
                null,
                schedules.map((s) =>
                  el(
                    'tr',
                    null,
                    el('td', { text: s.key }),
                    el('td', { text: s.cron ? `${s.cron} (${s.tz || 'UTC'})` : `every ${s.everyMs} ms` }),
                    el('td', { text: time(s.nextRunAt) }),
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

  function jobView(name, id) {
    var base = `/queues/${enc(name)}/jobs/${enc(id)}`;
    return api(base).then((j) => {
      var finished = j.state === 'completed' || j.state === 'dead';
      var fields = [
        ['state', badge(j.state)],
        ['attempts', `${j.attempts} of ${j.maxAttempts}`],
        ['priority', j.priority],
        ['created', time(j.createdAt)],
        ['run at', time(j.runAt)],
        ['started', time(j.startedAt)],
        ['finished', time(j.finishedAt)],
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
        el('h2', { text: 'Data' }),
        el('pre', { id: 'job-data', text: pretty(j.data) }),
        'result' in j
          ? [el('h2', { text: 'Result' }), el('pre', { id: 'job-result', text: pretty(j.result) })]
          : null,
        'progress' in j ? [el('h2', { text: 'Progress' }), el('pre', { text: pretty(j.progress) })] : null,
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
              el('span', { class: 'muted', text: time(e.at) }),
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

  function render() {
    var mine = ++generation;
    clearTimeout(timer);
    timer = null;
    var r = parse(),
      p = r.parts;
    current = p.length === 0 ? 'overview' : p[0] === 'queue' && p.length === 2 ? p[1] : null;
    var built =
      p.length === 0
        ? Promise.resolve(overview())
        : p[0] === 'queue' && p.length === 2
          ? queueView(p[1], r.params)
          : p[0] === 'queue' && p.length === 4 && p[2] === 'job'
            ? jobView(p[1], p[3])
            : Promise.resolve([
                el('h1', { text: 'Not found' }),
                el('a', { href: '#/', text: 'back to the queues' }),
              ]);
    built.then(
      (nodes) => {
        if (mine === generation) view.replaceChildren(el('div', null, nodes));
      },
      (err) => {
        if (mine === generation)
          view.replaceChildren(
            el('h1', { text: 'Error' }),
            el('p', { class: 'flash bad', text: err.message }),
            el('a', { href: '#/', text: 'back to the queues' }),
          );
      },
    );
  }

  // On a queue view, the state tabs follow the live counts (the job list changes on navigation only).
  function liveTabs(name) {
    var q = (latest || []).filter((x) => x.name === name)[0];
    if (!q) return;
    STATES.forEach((s) => {
      var span = view.querySelector(`nav.tabs [data-count="${s}"]`);
      if (span) span.textContent = String(q.counts[s]);
    });
  }

  function connect() {
    var es = new EventSource(`${BASE}/api/events`);
    es.addEventListener('queues', (e) => {
      latest = JSON.parse(e.data).queues;
      liveEl.textContent = `live ${new Date().toLocaleTimeString()}`;
      if (current === 'overview') {
        render();
        refreshCharts();
      } else if (current !== null) liveTabs(current);
    });
    es.addEventListener('error', () => {
      liveEl.textContent = 'reconnecting...';
    });
  }

  window.addEventListener('hashchange', () => {
    say('');
    render();
  });
  render();
  connect();
})();
