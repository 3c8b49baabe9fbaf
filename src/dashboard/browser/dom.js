// @ts-check
/**
 * Building DOM nodes: every piece of data goes in as a text node or an attribute (el(), svg());
 * nothing is ever parsed as HTML.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
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

/** A table: one header row (column names, or th elements), then `rows` (tr elements), in a scroll box. */
function table(id, headers, rows) {
  // Wrapped: a wide table scrolls inside its box, never the page (390 px phones).
  return el('div', { class: 'scroll' }, table0(id, headers, rows));
}
function table0(id, headers, rows) {
  return el(
    'table',
    { id },
    el(
      'thead',
      null,
      el(
        'tr',
        null,
        headers.map((h) => (typeof h === 'string' ? el('th', { text: h }) : h)),
      ),
    ),
    el('tbody', null, rows),
  );
}
