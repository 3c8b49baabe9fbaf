/**
 * The dashboard page: one HTML document with inline CSS and JS (no external assets, no framework).
 * Server-side values are placed only in escaped attributes; the script (the files of browser/, real
 * source files that biome and tsc check) renders job data with textContent / text nodes, never as
 * markup. The CSP allows only this document's nonce'd script/style.
 */
import { readFileSync } from 'node:fs';
import { JOB_STATES } from '../states.js';

/**
 * The page's script: the files of browser/, plain browser JavaScript sharing one scope, joined in this
 * order (state first: the others read it; app.js last: it starts the page) into one module script.
 * Each file is linted by biome and type-checked against the DOM by `tsc -p src/dashboard/browser`.
 */
export const SCRIPT_FILES = [
  'state.js',
  'dom.js',
  'times.js',
  'charts.js',
  'api.js',
  'redis-panel.js',
  'overview.js',
  'jobs-table.js',
  'search-view.js',
  'queue-view.js',
  'groups-view.js',
  'flow-view.js',
  'job-view.js',
  'app.js',
] as const;

/** Read once. Inlined, so it must never contain a closing script tag. */
const PAGE_SCRIPT = SCRIPT_FILES.map((f) =>
  readFileSync(new URL(`./browser/${f}`, import.meta.url), 'utf8'),
).join('\n');
if (/<\/script/i.test(PAGE_SCRIPT))
  throw new Error('src/dashboard/browser must not contain a closing script tag');

export interface PageOptions {
  csrf: string;
  nonce: string;
  readOnly: boolean;
}

export function escapeHtml(s: string): string {
  return s.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );
}

const CSS = `
:root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --accent:#2f5bea; --bad:#c0362c; --ok:#1f8a4c; --warn:#b7791f; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:16px; padding:10px 20px; background:#151a26; color:#fff; }
header a { color:#fff; text-decoration:none; font-weight:600; font-size:16px; }
header .live { margin-left:auto; font-size:12px; color:#9fb0d0; }
main { padding:16px 20px; max-width:1400px; }
h1 { font-size:20px; margin:8px 0 12px; overflow-wrap:anywhere; } h2 { font-size:15px; margin:20px 0 8px; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.02em; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
a { color:var(--accent); }
.badge { display:inline-block; padding:1px 7px; border-radius:10px; font-size:12px; background:var(--line); }
.badge.dead, .badge.paused { background:#fde4e1; color:var(--bad); } .badge.completed { background:#dff3e7; color:var(--ok); }
.badge.active { background:#e3eaff; color:var(--accent); } .badge.delayed, .badge.blocked { background:#fdf1dc; color:var(--warn); }
.tabs { display:flex; gap:6px; flex-wrap:wrap; margin:8px 0; }
.tabs a { padding:4px 10px; border-radius:6px; text-decoration:none; background:#fff; border:1px solid var(--line); }
.tabs a.on { background:var(--accent); color:#fff; border-color:var(--accent); }
button { font:inherit; padding:4px 10px; border-radius:6px; border:1px solid var(--line); background:#fff; cursor:pointer; }
button.danger { color:var(--bad); border-color:#f3c2bd; } button:disabled { opacity:.5; cursor:default; }
.bar { display:flex; gap:8px; align-items:center; flex-wrap:wrap; margin:8px 0; }
input { font:inherit; padding:4px 8px; border:1px solid var(--line); border-radius:6px; }
pre { background:#fff; border:1px solid var(--line); padding:8px 10px; overflow:auto; max-height:360px; margin:4px 0; white-space:pre-wrap; word-break:break-word; }
dl { display:grid; grid-template-columns:max-content 1fr; gap:4px 16px; background:#fff; border:1px solid var(--line); padding:10px; }
dt { color:var(--muted); } dd { margin:0; }
.flash { margin:8px 0; padding:6px 10px; border-radius:6px; background:#dff3e7; } .flash:empty { display:none; }
.flash.bad { background:#fde4e1; color:var(--bad); }
td.spark, #queues th, #queues td:first-child { white-space:nowrap; } .chart { vertical-align:middle; background:#fbfcfe; }
.chart rect { fill:var(--accent); } .chart.failure rect { fill:var(--bad); } .chart .axis { stroke:var(--line); }
.muted { color:var(--muted); } p, .err div, li { overflow-wrap:anywhere; } .err { border-left:3px solid var(--bad); padding-left:10px; margin:10px 0; }
.scroll { overflow-x:auto; max-width:100%; -webkit-overflow-scrolling:touch; }
.flash.notice { background:#fdf1dc; color:#7a5212; } .flash.warning { border-left:4px solid var(--bad); }
dl.facts { grid-template-columns:repeat(auto-fill, minmax(110px, max-content) minmax(170px, 1fr)); }
dd { min-width:0; overflow-wrap:anywhere; } td.wrap { overflow-wrap:anywhere; min-width:14em; max-width:28em; }
td.id { overflow-wrap:anywhere; min-width:6em; } td.pick, th.pick { width:1px; } td.row-actions { white-space:nowrap; } td.row-actions button { padding:2px 8px; font-size:12px; }
#range button.on { background:var(--accent); color:#fff; border-color:var(--accent); }
time { text-decoration:underline dotted var(--line); }
@media (max-width: 600px) {
  header { padding:8px 10px; gap:8px; flex-wrap:wrap; } header .live { margin-left:0; }
  main { padding:10px; } h1 { font-size:18px; }
  input { min-width:0; flex:1 1 140px; } .bar { gap:6px; }
  dl, dl.facts { grid-template-columns:max-content minmax(0, 1fr); }
  td.wrap { white-space:nowrap; max-width:none; }
}
`;

export function renderPage(o: PageOptions): string {
  const attr = escapeHtml;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="surety-csrf" content="${attr(o.csrf)}">
<meta name="surety-read-only" content="${o.readOnly ? 'true' : 'false'}">
<meta name="surety-states" content="${attr(JOB_STATES.join(','))}">
<title>Surety</title>
<style nonce="${attr(o.nonce)}">${CSS}</style>
</head>
<body>
<header><a href="#/">Surety</a><span class="muted">${o.readOnly ? 'read-only' : ''}</span><span class="live"><span id="tz" title="every time on this page is UTC; relative times show it on hover">times in UTC</span> &middot; <span id="live">connecting...</span></span></header>
<main><div id="flash" class="flash" role="status"></div><div id="view"></div></main>
<script type="module" nonce="${attr(o.nonce)}">${PAGE_SCRIPT}</script>
</body>
</html>`;
}
