// @ts-check
/**
 * The overview's Redis panel (GET /api/redis, refreshed with the charts): version, memory used
 * against maxmemory, clients, persistence settings, and a warning for each setting that can lose
 * acknowledged jobs (no AOF, appendfsync no, an eviction policy other than noeviction).
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
function redisPanel(info) {
  if (info === null) return null;
  if (info instanceof Error)
    return el('p', { class: 'flash bad', id: 'redis', text: `Redis: ${info.message}` });
  var mem = info.maxMemory
    ? `${bytes(info.usedMemory)} of ${bytes(info.maxMemory)} (${Math.round((info.usedMemory / info.maxMemory) * 100)}%)`
    : `${bytes(info.usedMemory)} (no maxmemory)`;
  var facts = [
    ['version', `${info.version} (${info.mode})`],
    ['memory', mem],
    ['clients', info.connectedClients],
    ['appendonly', info.appendonly ? 'yes' : 'no'],
    ['appendfsync', info.appendfsync ?? 'unknown'],
    ['maxmemory-policy', info.maxMemoryPolicy],
    ['up', dur(info.uptimeSeconds * 1000)],
  ];
  return el(
    'section',
    { id: 'redis' },
    el('h2', { text: 'Redis' }),
    info.warnings.map((w) =>
      el(
        'p',
        { class: w.level === 'danger' ? 'flash bad warning' : 'flash notice', 'data-warning': w.code },
        el('strong', { text: w.level === 'danger' ? 'Jobs can be lost: ' : 'Note: ' }),
        w.message,
      ),
    ),
    el(
      'dl',
      { class: 'facts' },
      facts.map((f) => [el('dt', { text: f[0] }), el('dd', { 'data-fact': f[0], text: String(f[1]) })]),
    ),
  );
}
