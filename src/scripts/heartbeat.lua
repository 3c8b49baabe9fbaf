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

local workers, info = KEYS[1], KEYS[2]
local now = current_time(ARGV[1])
if ARGV[4] == '' then
  redis.call('ZREM', workers, ARGV[3])
  redis.call('HDEL', info, ARGV[3])
else
  redis.call('ZADD', workers, now + tonumber(ARGV[2]), ARGV[3])
  redis.call('HSET', info, ARGV[3], '{"lastBeat":' .. now .. ',' .. string.sub(ARGV[4], 2))
end
local gone = redis.call('ZRANGEBYSCORE', workers, '-inf', '(' .. now, 'LIMIT', 0, 100)
if #gone > 0 then
  chunked_call('ZREM', workers, gone)
  chunked_call('HDEL', info, gone)
end
return now
