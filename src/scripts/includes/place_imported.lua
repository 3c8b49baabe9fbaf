-- @include parse_record
-- @include enqueue
-- @include announce_delayed
-- Puts an imported job whose record write_imported wrote where its state says: waiting (the back of
-- its priority, the front if lifo), delayed (by its runAt; announced to idle workers when it is the
-- first due) or dead (by its finish time). Until then no worker can see it (copy mode holds it so).
-- Returns true when idle workers must be woken.
local function place_imported(k, id, now)
  local f = parse_record(redis.call('HGET', k.jobs, id))
  local state = f[F_STATE]
  if state == 'w' then
    return enqueue(k.waiting, k.prio, k.seq, id, tonumber(f[F_PRIORITY]) or 0, f[F_LIFO] == '1', nil, now)
  elseif state == 'd' then
    redis.call('ZADD', k.delayed, f[F_RUN_AT], id)
    announce_delayed(k.delayed, k.wake, tonumber(f[F_RUN_AT]))
  else
    redis.call('ZADD', k.dead, f[F_FINISHED], id)
  end
  return false
end
