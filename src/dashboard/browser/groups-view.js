// @ts-check
/**
 * Flow control (docs/groups.md): on a queue's page, its stored rate limit, the default group limits
 * and the top groups by backlog (groupsPanel); a group's page (#/queue/NAME/group/G, groupView) with
 * its limits, its override and its first waiting jobs. Outside read-only mode, forms change limits.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function limitsText(l) {
  var c = l.concurrency === null ? 'no concurrency limit' : `concurrency ${l.concurrency}`;
  var r = l.rateLimit === null ? 'no rate limit' : `${l.rateLimit.max} per ${l.rateLimit.durationMs} ms`;
  return `${c}, ${r}`;
}

function groupHref(name, group) {
  return `#/queue/${enc(name)}/group/${enc(group)}`;
}

// A small form of number inputs; on submit, POSTs `path` with the filled fields as query parameters
// (an empty field is left out, so the server keeps its stored value; `none` lifts a limit), then
// re-renders.
function limitForm(id, path, fields, label, extra) {
  if (RO) return null;
  var inputs = fields.map((f) =>
    el('input', { name: f[0], placeholder: f[1], 'aria-label': f[1], size: 10 }),
  );
  return el(
    'form',
    {
      class: 'bar',
      id,
      onsubmit: (e) => {
        e.preventDefault();
        var q = inputs
          .filter((i) => i.value.trim() !== '')
          .map((i) => `${i.name}=${enc(i.value.trim())}`)
          .join('&');
        post(`${path}${path.indexOf('?') < 0 ? '?' : '&'}${q}`).then(
          () => {
            say(`${label}: saved`);
            render();
          },
          (err) => say(err.message, true),
        );
      },
    },
    inputs,
    el('button', { type: 'submit', text: label }),
    extra || null,
    el('span', { class: 'muted', text: 'empty: unchanged, none: no limit' }),
  );
}

function groupsPanel(name, page, limits) {
  var rows = page.groups.map((g) =>
    el(
      'tr',
      { 'data-group': g.group },
      el('td', null, el('a', { href: groupHref(name, g.group), text: g.group })),
      el('td', { class: 'num', text: g.waiting }),
      el('td', { class: 'num', text: g.active }),
      el('td', { text: limitsText(g.limits) }),
      el('td', null, g.parkedUntil ? ago(g.parkedUntil) : ''),
    ),
  );
  return [
    el('h2', { text: 'Flow control' }),
    el('p', {
      id: 'rate-limit',
      text: limits.rateLimit
        ? `Queue rate limit: ${limits.rateLimit.max} starts per ${limits.rateLimit.durationMs} ms (all workers)`
        : 'Queue rate limit: none stored',
    }),
    limitForm(
      'rate-form',
      `/queues/${enc(name)}/rate-limit`,
      [
        ['max', 'max starts (or none)'],
        ['durationMs', 'per ms'],
      ],
      'Set rate limit',
    ),
    el('p', { id: 'group-defaults', text: `Every group: ${limitsText(limits.groupLimits)}` }),
    limitForm(
      'group-defaults-form',
      `/queues/${enc(name)}/group-limits`,
      [
        ['concurrency', 'concurrency (or none)'],
        ['rateMax', 'starts (or none)'],
        ['rateDurationMs', 'per ms'],
      ],
      'Set group defaults',
    ),
    el('h2', { text: `Groups (${page.groups.length}${page.cursor ? '+' : ''}, most waiting first)` }),
    rows.length === 0
      ? el('p', { class: 'muted', text: 'No group has jobs.' })
      : table('groups', ['group', 'waiting', 'active', 'limits', 'parked until'], rows),
  ];
}

function groupView(name, group) {
  return api(`/queues/${enc(name)}/groups/${enc(group)}`).then((g) => {
    var l = g.limits;
    var own = l.override
      ? Object.keys(l.override)
          .map((k) => `${k} ${JSON.stringify(l.override[k])}`)
          .join(', ')
      : 'none (inherits the defaults)';
    var path = `/queues/${enc(name)}/group-limits?group=${enc(group)}`;
    return [
      el('h1', null, el('a', { href: queueHref(name, 'waiting'), text: name }), ` / group ${group}`),
      el('p', { id: 'group-limits', text: `Limits: ${limitsText(l)}` }),
      el('p', { id: 'group-override', text: `Override: ${own}` }),
      limitForm(
        'group-form',
        path,
        [
          ['concurrency', 'concurrency (or none)'],
          ['rateMax', 'starts (or none)'],
          ['rateDurationMs', 'per ms'],
        ],
        'Set override',
        l.override ? act('Clear override', `${path}&clear=1`, { name: 'clear-override' }) : null,
      ),
      el('h2', { text: `Waiting jobs (first ${g.waiting.length}, in claim order)` }),
      g.waiting.length === 0
        ? el('p', { class: 'muted', text: 'None waiting.' })
        : table(
            'group-jobs',
            ['id', 'priority', 'created'],
            g.waiting.map((j) =>
              el(
                'tr',
                { 'data-job': j.id },
                el('td', null, el('a', { href: jobHref(name, j.id), text: j.id })),
                el('td', { class: 'num', text: j.priority }),
                el('td', null, ago(j.createdAt)),
              ),
            ),
          ),
    ];
  });
}
