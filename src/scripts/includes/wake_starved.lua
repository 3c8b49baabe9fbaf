-- Active jobs just finished or were revoked: if a claim found the queue at its global concurrency
-- limit (meta `starved`), wake idle workers now that there is room, instead of letting them poll.
local function wake_starved(meta_key, wake_channel)
  if redis.call('HDEL', meta_key, 'starved') == 1 then redis.call('SPUBLISH', wake_channel, 'w') end
end
