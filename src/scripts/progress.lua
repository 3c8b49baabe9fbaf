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

local annex = KEYS[2]
local id = ARGV[1]
if not held_record(KEYS[1], id, ARGV[2]) then return 0 end
if ARGV[3] ~= '' then
  redis.call('HSET', annex, id .. '\1p', ARGV[3])
  emit_event(KEYS[3], ARGV[5], 'progress', { id }, ARGV[3])
end
if #ARGV >= 6 then
  local field = id .. '\1l'
  local lines = {}
  local old = redis.call('HGET', annex, field)
  if old then
    for line in string.gmatch(old, '[^\n]+') do lines[#lines + 1] = line end
  end
  for i = 6, #ARGV do lines[#lines + 1] = ARGV[i] end
  local max = tonumber(ARGV[4])
  local first = math.max(1, #lines - max + 1)
  redis.call('HSET', annex, field, table.concat(lines, '\n', first))
end
return 1
