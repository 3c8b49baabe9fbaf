#!lua
-- set-rate-limit.lua: set or remove the queue's stored rate limit (job starts per window across all
-- workers, enforced by claim.lua; while set it replaces every worker's own `limiter` option). Plain
-- `#!lua`: over maxmemory it is refused before it runs (test/oom.test.ts).
-- KEYS[1] meta            HASH (field `rate`: `max|windowMs`)
-- KEYS[2] queueLimiter    STRING starts in the current window, reset so a new limit starts afresh
-- ARGV[1] rate            `max|windowMs`, or '' to remove the limit
-- ARGV[2] wakeChannel
-- Returns: 1
-- Workers sleeping on the old window are woken to look again.
local meta = meta_key
if arg_rate == '' then
  redis.call('HDEL', meta, 'rate')
else
  redis.call('HSET', meta, 'rate', arg_rate)
end
redis.call('DEL', queue_limiter_key)
redis.call('SPUBLISH', arg_wake_channel, 'w')
return 1
