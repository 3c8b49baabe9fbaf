-- @include emit_queue_event
-- Claim stage (claim.lua): called by a claim that took jobs out of waiting; appends `drained` when it
-- took the last one (the queue's list and prio zset gone, no grouped job waiting). So the event comes
-- once per emptying, not on every claim: a claim that finds waiting empty has taken nothing and is
-- not asked. It costs one EXISTS per claim that took jobs, and a GET of the grouped count only when
-- the queue's own lists are empty. Delayed jobs may remain: they are not waiting yet.
local function emit_drained(k, gk, max_len)
  if (tonumber(max_len) or 0) <= 0 then return end
  if redis.call('EXISTS', k.waiting, k.prio) > 0 then return end
  if tonumber(redis.call('GET', gk.waiting) or '0') > 0 then return end
  emit_queue_event(k.events, max_len, 'drained')
end
