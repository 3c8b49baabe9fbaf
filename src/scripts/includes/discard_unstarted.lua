-- @include unlink
-- @include annex_fields
-- Deletes job `id` if it has not started (waiting or delayed); a running or finished job is left alone.
-- Returns true when it deleted the job. Needs annex_fields and unlink.
local function discard_unstarted(jobs_key, errors_key, waiting_key, prio_key, delayed_key, id)
  local rec = redis.call('HGET', jobs_key, id)
  if not rec then return false end
  local state = string.sub(rec, 1, 1)
  if state ~= 'w' and state ~= 'd' then return false end
  unlink({ jobs = jobs_key, waiting = waiting_key, prio = prio_key, delayed = delayed_key }, id, state, rec, nil)
  redis.call('HDEL', jobs_key, id)
  redis.call('HDEL', errors_key, unpack(annex_fields({ id })))
  return true
end
