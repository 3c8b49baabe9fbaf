#!lua flags=allow-oom
-- set-paused.lua: pause or resume claiming for every worker of the queue. Resuming wakes idle workers,
-- and also lifts a pause a processor's RateLimitError set (field `limited`, see fail.lua), so an
-- operator can end one that was too long. Appends `paused` or `resumed` to the event stream when the
-- call changes something (pausing a paused queue, or resuming one neither paused nor rate limited,
-- appends nothing).
-- KEYS[1] meta            HASH (fields `paused`, `limited`)
-- KEYS[2] events          STREAM lifecycle events
-- ARGV[1] paused          '1' to pause, '0' to resume
-- ARGV[2] wakeChannel
-- ARGV[3] eventsMaxLen    event stream cap (0 = no events)
-- Returns: 1
-- @include emit_queue_event

local meta = meta_key
if arg_paused == '1' then
  if redis.call('HSET', meta, 'paused', '1') == 1 then emit_queue_event(events_key, arg_events_max_len, 'paused') end
else
  if redis.call('HDEL', meta, 'paused', 'limited') > 0 then
    emit_queue_event(events_key, arg_events_max_len, 'resumed')
  end
  redis.call('SPUBLISH', arg_wake_channel, 'w')
end
return 1
