// @ts-check
/**
 * The page's shared state: where the API is, the CSRF token, the list of states (from the page: meta
 * surety-states, rendered from JOB_STATES), the view elements, and what the live stream last sent.
 * One of the dashboard page's script files: page.ts joins them into one script (SCRIPT_FILES).
 */
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
// Per-queue metrics of the chosen range (GET /api/queues/:q/metrics), refreshed every CHART_MS on the overview.
var CHART_MS = 10000,
  CW = 96,
  CH = 26,
  SVGNS = 'http://www.w3.org/2000/svg';
var charts = {},
  chartsAt = 0,
  chartsBusy = false;
// Chart ranges: [window, bucket] in ms, 60 bars each. Per-queue stats (latency, throughput), Redis info.
var RANGES = {
    '1h': [3600000, 60000],
    '6h': [21600000, 360000],
    '24h': [86400000, 1440000],
    '7d': [604800000, 10080000],
  },
  range = '1h';
var stats = {},
  redisInfo = null;
