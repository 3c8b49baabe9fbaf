#!lua flags=allow-oom
-- clean.lua: delete finished jobs (completed or dead) that finished at or before a cutoff, oldest
-- first, at most `limit` per call, with their records and annex fields: retention on demand. A call
-- that deletes jobs appends one `cleaned` entry (`count`, `state`) to the event stream.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs, parents
-- KEYS[3] finished        ZSET completed or dead (score: finish time)
-- KEYS[4] events          STREAM lifecycle events
-- ARGV[1] cutoff          epoch ms (Redis clock): jobs finished at or before it go
-- ARGV[2] limit           most jobs deleted per call
-- ARGV[3] state           'completed' or 'dead': the set `finished` is (for the event)
-- ARGV[4] eventsMaxLen    event stream cap (0 = no events)
-- Returns: { deleted count, 1 when more old jobs remain else 0 }
-- @include annex_fields
-- @include chunked_call
-- @include emit_queue_event

local jobs, annex, finished = jobs_key, annex_key, finished_key
local limit = tonumber(arg_limit)
local victims = redis.call('ZRANGEBYSCORE', finished, '-inf', arg_cutoff, 'LIMIT', 0, limit)
if #victims == 0 then return { 0, 0 } end
chunked_call('ZREM', finished, victims)
chunked_call('HDEL', jobs, victims)
if redis.call('EXISTS', annex) == 1 then chunked_call('HDEL', annex, annex_fields(victims)) end
emit_queue_event(events_key, arg_events_max_len, 'cleaned', 'count', #victims, 'state', arg_state)
local more = #victims == limit and #redis.call('ZRANGEBYSCORE', finished, '-inf', arg_cutoff, 'LIMIT', 0, 1) or 0
return { #victims, more }
