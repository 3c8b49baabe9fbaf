// @ts-check
/**
 * Formatting, the flash message, calls to the JSON API (with the CSRF header on POSTs), and the
 * hash routes: #/ (every queue), #/queue/NAME?state=dead&offset=0, #/queue/NAME/job/ID.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
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
