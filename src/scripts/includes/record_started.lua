-- Whether job record `rec` has ever started: attempts > 0 (header field 2, attempts started) or a
-- startedAt (field 6, kept once set). A waiting or delayed job that has started (a retry, a snoozed
-- job, one in job.sleep) may hold steps and keeps its place: debounce never rewrites it, and removing
-- it does not give back its dedupe window. Both fields are read, so this holds whether or not a
-- snooze gives its attempt back. One anchored match, no header split.
local STARTED_PATTERN = '^[^|\n]*|[^|\n]*|([^|\n]*)|[^|\n]*|[^|\n]*|[^|\n]*|([^|\n]*)'
local function record_started(rec)
  local attempts, started = string.match(rec, STARTED_PATTERN)
  return (attempts ~= nil and attempts ~= '' and attempts ~= '0') or (started ~= nil and started ~= '')
end
