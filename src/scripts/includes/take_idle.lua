-- @include tag_key
-- Handoff (add-one.lua): a unit of the registration of an idle worker's fetcher that may take a job
-- added now, popped from the queue's `idle` ZSET (member `<fetcher id>|<claim nonce>|<unit>`, score =
-- deadline; written by claim.lua, one member per job the fetcher may be handed), or nil. Only when
-- the job could be claimed at once by any worker: the queue is not paused, has no global concurrency
-- or rate limit and no rate-limit pause, and no job waits before it (FIFO: `waiting` and `prio` are
-- empty). The newest registration is taken (the likeliest to be alive); past its deadline every one
-- is, and the set is dropped. The caller puts a registration it took but did not use back.
local function take_idle(idle, jobs, meta, waiting, now)
  -- ZRANGE and ZREM, not ZPOPMAX: the same commands claims use, so the documented ACL rules of
  -- earlier versions still cover every add. EXISTS first: with no worker idle (a busy queue), an
  -- integer reply costs Redis far less than an empty ZRANGE's table.
  if redis.call('EXISTS', idle) == 0 then return nil end
  local reg = redis.call('ZRANGE', idle, -1, -1, 'WITHSCORES')
  if not reg[1] then return nil end
  redis.call('ZREM', idle, reg[1])
  if tonumber(reg[2]) < now then
    redis.call('DEL', idle)
    return nil
  end
  local flags = redis.call('HMGET', meta, 'paused', 'concurrency', 'rate', 'limited')
  if flags[1] or flags[2] or flags[3] or (flags[4] and tonumber(flags[4]) > now)
    or redis.call('EXISTS', waiting, tag_key(jobs, 'prio')) > 0 then
    redis.call('ZADD', idle, reg[2], reg[1])
    return nil
  end
  return reg[1], reg[2]
end
