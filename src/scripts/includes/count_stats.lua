-- @include int_text
-- Per-minute counters for queue.metrics(): field `<minute>:<kind>` of the stats hash (kind c =
-- completed, f = failed attempts, x = ended dead; minute = epoch ms / 60 000). The last `keep` minutes
-- are kept besides the current one (field `keep`, set by queue.setMetricsRetention; default 60, at
-- most 10 080 = 7 days, so the hash stays bounded): the first write of a new minute deletes the
-- minutes that fell out of the window since the previous write (field `last`), so an idle queue
-- leaves nothing stale behind. Deletions go 1 000 fields per HDEL (unpack's limit).
local function count_stats(stats_key, now, kind, n)
  if n == 0 then return end
  local minute = math.floor(now / 60000)
  -- Only the first write of a minute's field can start a new minute: the others skip reading `last`.
  -- (Numbers as text: a Lua number costs Redis, or a concatenation, a float format.)
  if redis.call('HINCRBY', stats_key, int_text(minute) .. ':' .. kind, int_text(n)) ~= n then return end
  local last = tonumber(redis.call('HGET', stats_key, 'last'))
  if last == nil or minute > last then
    if last ~= nil then
      local keep = tonumber(redis.call('HGET', stats_key, 'keep')) or 60
      local stale = {}
      for m = last - keep, math.min(last, minute - keep - 1) do
        stale[#stale + 1] = m .. ':c'
        stale[#stale + 1] = m .. ':f'
        stale[#stale + 1] = m .. ':x'
        if #stale >= 999 then
          redis.call('HDEL', stats_key, unpack(stale))
          stale = {}
        end
      end
      if #stale > 0 then redis.call('HDEL', stats_key, unpack(stale)) end
    end
    redis.call('HSET', stats_key, 'last', minute)
  end
end
