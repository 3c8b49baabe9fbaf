#!lua
-- set-concurrency.lua: set or remove the queue's global concurrency limit (active jobs of the queue
-- across all workers, enforced by claim.lua). Plain `#!lua` (no allow-oom): over maxmemory it is
-- refused before it runs, like the plain HSET it replaced (test/oom.test.ts).
-- KEYS[1] meta            HASH (field `concurrency`)
-- ARGV[1] concurrency     the limit (an integer >= 1), or '' to remove it
-- ARGV[2] wakeChannel
-- Returns: 1
-- Raising or removing the limit wakes workers a claim held back at the old one (meta `starved`).
-- @include wake_starved
local meta = meta_key
if arg_concurrency == '' then
  redis.call('HDEL', meta, 'concurrency')
else
  redis.call('HSET', meta, 'concurrency', arg_concurrency)
end
wake_starved(meta, arg_wake_channel)
return 1
