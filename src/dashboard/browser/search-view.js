// @ts-check
/**
 * Searching a state's jobs by their data (GET /api/queues/:q/search): `text` is a case-insensitive
 * substring of the data as JSON; `field=value` (a dotted path, e.g. user.id=42) matches one field.
 * The search looks at the SEARCH_SCAN newest jobs of the state at most, and says so on the page.
 * Searching by id is the "Open job" form (queue-view.js).
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
var SEARCH_SCAN = 1000;
function searchParams(query) {
  var m = /^([A-Za-z_$][\w$]*(?:\.[\w$]+)*)=(.*)$/.exec(query);
  return m ? `field=${enc(m[1])}&value=${enc(m[2])}` : `q=${enc(query)}`;
}
function searchHref(name, state, query) {
  return `${queueHref(name, state)}${query ? `&q=${enc(query)}` : ''}`;
}
function dataSearch(name, state, query, count) {
  var input = el('input', {
    name: 'q',
    value: query,
    placeholder: 'text in data, or field=value',
    'aria-label': 'search job data',
  });
  return el(
    'form',
    {
      class: 'bar',
      id: 'data-search',
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = searchHref(name, state, input.value.trim());
      },
    },
    input,
    el('button', { type: 'submit', text: 'Search data' }),
    el('span', {
      class: 'muted',
      id: 'search-bound',
      text: `looks at the newest ${Math.min(SEARCH_SCAN, count).toLocaleString('en')} of ${count.toLocaleString('en')} ${state} jobs (at most ${SEARCH_SCAN.toLocaleString('en')})`,
    }),
    query ? el('a', { href: queueHref(name, state), text: 'clear search' }) : null,
  );
}
function searchSummary(state, found) {
  return el('p', {
    class: 'muted',
    id: 'search-summary',
    text: `${found.jobs.length} match${found.jobs.length === 1 ? '' : 'es'} in the ${found.scanned} newest ${state} jobs${
      found.more ? ' (stopped there: narrow the search, or older jobs were not looked at)' : ''
    }`,
  });
}
