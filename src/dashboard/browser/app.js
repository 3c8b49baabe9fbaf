// @ts-check
/**
 * Rendering the route, and the live stream (GET /api/events, Server-Sent Events) that keeps the
 * counts current; then the page starts.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
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
          : p[0] === 'queue' && p.length === 4 && p[2] === 'group'
            ? groupView(p[1], p[3])
            : p[0] === 'queue' && p.length === 4 && p[2] === 'batch'
              ? batchView(p[1], p[3])
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
    liveEl.textContent = `live ${time(Date.now()).slice(11)}`;
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
setInterval(refreshTimes, RELATIVE_MS);
