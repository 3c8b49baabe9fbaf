// @ts-check
/**
 * The flow of a job on its page (GET .../jobs/:id/flow, queue.flow): the jobs it depends on and those
 * that depend on it, across queues, as a nested list drawn from the jobs with no parent down through
 * their children. Each job is a link to its page, with its state; a job reached a second time (a
 * diamond's join) is drawn once and referred to later as "see above"; where the walk was cut, a
 * marker says so.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function flowSection(flow) {
  if (flow instanceof Error)
    return [el('h2', { text: 'Flow' }), el('p', { class: 'flash bad', text: flow.message })];
  // A job alone (no parent, no child) has no flow worth a section.
  if (flow.nodes.length <= 1 && !flow.truncated) return null;
  var key = (r) => `${r.queue}\n${r.id}`;
  var byKey = new Map(flow.nodes.map((n) => [key(n), n]));
  var cut = new Set(flow.cut.map(key));
  var drawn = new Set();
  var label = (n) => (n.queue === flow.root.queue ? n.id : `${n.id} [${n.queue}]`);
  var item = (n) => {
    var k = key(n);
    var link = el('a', {
      href: jobHref(n.queue, n.id),
      'data-flow-node': `${n.queue}/${n.id}`,
      text: label(n),
    });
    if (drawn.has(k)) return el('li', null, link, ' ', el('span', { class: 'muted', text: '(see above)' }));
    drawn.add(k);
    var children = n.children.filter((c) => byKey.has(key(c))).map((c) => item(byKey.get(key(c))));
    var more = cut.has(k)
      ? el('li', {
          class: 'muted',
          'data-flow-cut': '1',
          text: '... cut here: more jobs are linked (maxNodes)',
        })
      : null;
    return el(
      'li',
      null,
      k === key(flow.root) ? el('strong', null, link) : link,
      ' ',
      n.state === 'missing' ? el('span', { class: 'muted', text: 'missing' }) : badge(n.state),
      n.name ? [' ', el('span', { class: 'muted', text: n.name })] : null,
      children.length || more ? el('ul', null, children, more) : null,
    );
  };
  var tops = flow.nodes.filter((n) => !n.parents.some((p) => byKey.has(key(p))));
  var lists = tops.map(item);
  // A cycle has no top (ids reused could fake one): what was not reached is drawn from itself.
  flow.nodes.forEach((n) => {
    if (!drawn.has(key(n))) lists.push(item(n));
  });
  return [
    el('h2', {
      text: `Flow (${flow.nodes.length} job${flow.nodes.length === 1 ? '' : 's'}${flow.truncated ? ', cut' : ''})`,
    }),
    el('ul', { id: 'job-flow', class: 'flow' }, lists),
  ];
}
