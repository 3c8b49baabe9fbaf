#!lua flags=allow-oom
-- heartbeat.lua: register a live worker (or remove it when `info` is ''), and forget workers whose
-- heartbeat expired.
-- KEYS[1] workers         ZSET worker id -> heartbeat expiry
-- KEYS[2] workerInfo      HASH worker id -> JSON description
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] ttlMs           how long this beat keeps the worker listed
-- ARGV[3] workerId
-- ARGV[4] info            JSON description with `lastBeat` left for this script to fill, '' = unregister
-- Returns: the Redis time of this beat
-- @include current_time
-- @include chunked_call

local workers, info = workers_key, worker_info_key
local now = current_time(arg_now)
if arg_info == '' then
  redis.call('ZREM', workers, arg_worker_id)
  redis.call('HDEL', info, arg_worker_id)
else
  redis.call('ZADD', workers, now + tonumber(arg_ttl_ms), arg_worker_id)
  redis.call('HSET', info, arg_worker_id, '{"lastBeat":' .. now .. ',' .. string.sub(arg_info, 2))
end
local gone = redis.call('ZRANGEBYSCORE', workers, '-inf', '(' .. now, 'LIMIT', 0, 100)
if #gone > 0 then
  chunked_call('ZREM', workers, gone)
  chunked_call('HDEL', info, gone)
end
return now
