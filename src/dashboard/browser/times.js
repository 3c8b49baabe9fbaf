// @ts-check
/**
 * Times: one time zone throughout, UTC (said once in the page header), as absolute times
 * ("2026-11-23 09:57:27Z", time()), and relative ones ("3 min ago", ago()) with the absolute time
 * in the tooltip, refreshed every RELATIVE_MS by refreshTimes(). Durations: dur().
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
var RELATIVE_MS = 10000;
function dur(ms) {
  var s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  var m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  var h = Math.floor(m / 60);
  if (h < 48) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}
function relative(ms, now) {
  var d = now - ms;
  if (Math.abs(d) < 1500) return 'now';
  // Coarse on purpose: "3 min ago", not "3 min 12 s ago".
  var a = Math.abs(d),
    text =
      a < 60000
        ? `${Math.round(a / 1000)} s`
        : a < 3600000
          ? `${Math.floor(a / 60000)} min`
          : a < 172800000
            ? `${Math.floor(a / 3600000)} h`
            : `${Math.floor(a / 86400000)} d`;
  return d > 0 ? `${text} ago` : `in ${text}`;
}
/** A <time> showing "3 min ago" (or "in 5 min"), the absolute UTC time as its tooltip. */
function ago(ms) {
  if (!ms) return '';
  return el('time', {
    datetime: new Date(ms).toISOString(),
    title: time(ms),
    'data-at': ms,
    text: relative(ms, Date.now()),
  });
}
function refreshTimes() {
  var now = Date.now();
  document.querySelectorAll('time[data-at]').forEach((t) => {
    t.textContent = relative(Number(t.getAttribute('data-at')), now);
  });
  document.querySelectorAll('[data-since]').forEach((t) => {
    t.textContent = dur(now - Number(t.getAttribute('data-since')));
  });
}
function bytes(n) {
  if (!(n > 0)) return '0 B';
  var units = ['B', 'KB', 'MB', 'GB', 'TB'],
    i = Math.min(units.length - 1, Math.floor(Math.log(n) / Math.log(1024)));
  return `${(n / 1024 ** i).toFixed(i ? 1 : 0)} ${units[i]}`;
}
