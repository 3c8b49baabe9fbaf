-- Takes job `id` out of the structure its state letter puts it in: the waiting list or prio zset (w),
-- delayed (d), deps (b), active (a), completed (c) or dead (x). `k` names the keys; a caller that
-- never passes a state may leave its key out. The caller decides which states it accepts.
local function unlink(k, id, state)
  if state == 'w' then
    -- LREM is O(n) in the list length: removing a waiting job is an admin action, not a hot path.
    if redis.call('ZREM', k.prio, id) == 0 then redis.call('LREM', k.waiting, 1, id) end
  elseif state == 'd' then
    redis.call('ZREM', k.delayed, id)
  elseif state == 'b' then
    redis.call('HDEL', k.deps, id)
  elseif state == 'a' then
    redis.call('ZREM', k.active, id)
  elseif state == 'c' then
    redis.call('ZREM', k.completed, id)
  elseif state == 'x' then
    redis.call('ZREM', k.dead, id)
  end
end
