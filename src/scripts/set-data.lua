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
-- @include held_record
-- @include write_data

local id = arg_id
local rec = held_record(jobs_key, id, arg_token)
if not rec then return 0 end
write_data(jobs_key, annex_key, id, rec, arg_data)
return 1
