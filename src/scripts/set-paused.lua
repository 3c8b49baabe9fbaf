#!lua flags=allow-oom
-- set-paused.lua: pause or resume claiming for every worker of the queue. Resuming wakes idle workers,
-- and also lifts a pause a processor's RateLimitError set (field `limited`, see fail.lua), so an
-- operator can end one that was too long.
-- KEYS[1] meta            HASH (fields `paused`, `limited`)
-- ARGV[1] paused          '1' to pause, '0' to resume
-- ARGV[2] wakeChannel
-- Returns: 1
local meta = meta_key
if arg_paused == '1' then
  redis.call('HSET', meta, 'paused', '1')
else
  redis.call('HDEL', meta, 'paused', 'limited')
  redis.call('SPUBLISH', arg_wake_channel, 'w')
end
return 1
