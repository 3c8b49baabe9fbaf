-- @include enqueue
-- @include record_group
-- @include int_text
-- Creates job `id` unless it exists: delayed when `due` is after `now`, else waiting. Returns true when
-- it created the job and it became claimable in an empty structure (idle workers must be woken).
-- Used by the schedule scripts; add.lua has its own batched version of the same steps.
local function create_job(jobs_key, waiting_key, prio_key, seq_key, delayed_key, id, now, due, priority, tail, data)
  local state = due > now and 'd' or 'w'
  local rec = state .. '||0||' .. int_text(now) .. '|' .. int_text(due) .. '|||' .. tail .. '\n' .. data
  if redis.call('HSETNX', jobs_key, id, rec) == 0 then return false end
  if state == 'd' then
    redis.call('ZADD', delayed_key, due, id)
    return false
  end
  return enqueue(waiting_key, prio_key, seq_key, id, priority, record_lifo(rec), record_group(rec), now)
end
