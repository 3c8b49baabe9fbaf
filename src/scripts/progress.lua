#!lua flags=allow-oom
-- progress.lua: a running attempt reports progress and/or appends log lines. Fenced: only while the
-- job is active under the caller's token, so a stale worker cannot overwrite a newer attempt's
-- progress. Logs keep the last `maxLines` lines.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- KEYS[3] events          STREAM lifecycle events
-- ARGV[1] id
-- ARGV[2] token
-- ARGV[3] progress        JSON, '' = unchanged
-- ARGV[4] maxLines        log lines kept per job
-- ARGV[5] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[6..] repeated: line
--   log lines to append (JSON strings; none, one or many)
-- Returns: 1 when applied, 0 when the caller no longer holds the job
-- @include held_record
-- @include emit_event
-- @include append_log

local annex = annex_key
local id = arg_id
if not held_record(jobs_key, id, arg_token) then return 0 end
if arg_progress ~= '' then
  redis.call('HSET', annex, id .. '\1p', arg_progress)
  emit_event(events_key, arg_events_max_len, 'progress', { id }, arg_progress)
end
if #ARGV >= 6 then
  local lines = {}
  for i = 6, #ARGV do lines[#lines + 1] = ARGV[i] end
  append_log(annex, id, lines, tonumber(arg_max_lines))
end
return 1
