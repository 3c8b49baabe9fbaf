-- Deletes job `id` if it has not started (waiting or delayed); a running or finished job is left alone.
-- Needs annex_fields.
local function discard_unstarted(jobs_key, errors_key, waiting_key, prio_key, delayed_key, id)
  local rec = redis.call('HGET', jobs_key, id)
  if not rec then return end
  local state = string.sub(rec, 1, 1)
  if state == 'd' then
    redis.call('ZREM', delayed_key, id)
  elseif state == 'w' then
    if redis.call('ZREM', prio_key, id) == 0 then redis.call('LREM', waiting_key, 1, id) end
  else
    return
  end
  redis.call('HDEL', jobs_key, id)
  redis.call('HDEL', errors_key, unpack(annex_fields({ id })))
end
