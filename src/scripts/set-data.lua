#!lua flags=allow-oom
-- set-data.lua: a running attempt replaces its job's data (job.updateData), e.g. to carry state to
-- the next attempt. Fenced: only while the job is active under the caller's token, so a worker whose
-- lease was lost cannot overwrite the data a newer attempt works with. A payload over BODY_INLINE_MAX
-- bytes goes to the annex (field id .. "\1b") and the record keeps the marker, as add.lua does.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (field id .. "\1b": a large payload)
-- ARGV[1] id
-- ARGV[2] token           the fencing token of the caller's attempt
-- ARGV[3] data            the new data, JSON (size checked by the client)
-- Returns: 1 replaced, 0 the caller no longer holds the job
-- @include pipe_positions
-- @include parse_record
-- @include body_marker

local jobs, annex = KEYS[1], KEYS[2]
local id = ARGV[1]
local rec = redis.call('HGET', jobs, id)
if not rec then return 0 end
local p = pipe_positions(rec, F_TOKEN, {})
if string.sub(rec, 1, 1) ~= 'a' or string.sub(rec, p[F_STATE] + 1, p[F_TOKEN] - 1) ~= ARGV[2] then return 0 end
local data = ARGV[3]
if #data > BODY_INLINE_MAX then
  redis.call('HSET', annex, id .. '\1b', data)
  data = BODY_MARKER
else
  redis.call('HDEL', annex, id .. '\1b')
end
-- An active record holds no result: the data runs from the header's newline to the end.
local nl = string.find(rec, '\n', 1, true)
redis.call('HSET', jobs, id, string.sub(rec, 1, nl) .. data)
return 1
