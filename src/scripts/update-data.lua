#!lua flags=allow-oom
-- update-data.lua: an operator replaces the data of a job that is not running (queue.updateData):
-- waiting, delayed, blocked, and also completed or dead (fix the data, then retry it). An active job
-- is refused: its attempt replaces its own data with job.updateData (set-data.lua, fenced). The state,
-- the place in line and a completed job's result are kept. A payload over BODY_INLINE_MAX bytes goes
-- to the annex (field id .. "\1b") and the record keeps the marker, as add.lua does.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (field id .. "\1b": a large payload)
-- ARGV[1] id
-- ARGV[2] data            the new data, JSON (validated and size-checked by the client)
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:a'
-- @include write_data

local jobs, annex = jobs_key, annex_key
local id = arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
if string.sub(rec, 1, 1) == 'a' then return 'INVALID_STATE:a' end
write_data(jobs, annex, id, rec, arg_data)
return 'OK'
