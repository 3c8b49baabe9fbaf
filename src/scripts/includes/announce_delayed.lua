-- After delayed jobs were added: if the earliest of them (`min_due`) is now the first due job of the
-- queue, tell idle workers, whose timers are set to the previous first due time.
local function announce_delayed(delayed_key, wake_channel, min_due)
  if min_due == nil then return end
  local first = redis.call('ZRANGE', delayed_key, 0, 0, 'WITHSCORES')
  if first[2] ~= nil and tonumber(first[2]) >= min_due then
    redis.call('SPUBLISH', wake_channel, 'd')
  end
end
