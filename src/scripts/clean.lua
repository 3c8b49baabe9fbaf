#!lua flags=allow-oom
-- clean.lua: delete finished jobs (completed or dead) that finished at or before a cutoff, oldest
-- first, at most `limit` per call, with their records and annex fields: retention on demand.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs, parents
-- KEYS[3] finished        ZSET completed or dead (score: finish time)
-- ARGV[1] cutoff          epoch ms (Redis clock): jobs finished at or before it go
-- ARGV[2] limit           most jobs deleted per call
-- Returns: { deleted count, 1 when more old jobs remain else 0 }
-- @include annex_fields
-- @include chunked_call

local jobs, annex, finished = jobs_key, annex_key, finished_key
local limit = tonumber(arg_limit)
local victims = redis.call('ZRANGEBYSCORE', finished, '-inf', arg_cutoff, 'LIMIT', 0, limit)
if #victims == 0 then return { 0, 0 } end
chunked_call('ZREM', finished, victims)
chunked_call('HDEL', jobs, victims)
if redis.call('EXISTS', annex) == 1 then chunked_call('HDEL', annex, annex_fields(victims)) end
local more = #victims == limit and #redis.call('ZRANGEBYSCORE', finished, '-inf', arg_cutoff, 'LIMIT', 0, 1) or 0
return { #victims, more }
