-- @include group_wake
-- @include group_keys
-- @include record_group
-- @include group_leave
-- Takes job `id` out of the structure its state letter puts it in: the waiting list or prio zset (w),
-- delayed (d), deps (b), active (a), completed (c) or dead (x). `k` names the keys; a caller that
-- never passes a state may leave its key out. The caller decides which states it accepts.
-- A job of a group (record `rec`) is taken out of its group's list, and an active one frees its group
-- slot (group_leave, at `now`).
local function unlink(k, id, state, rec, now)
  local group = rec and record_group(rec)
  if group and (state == 'w' or state == 'a') then
    local gk = group_keys(k.jobs)
    if state == 'a' then
      redis.call('ZREM', k.active, id)
      group_leave(gk, group, 1, now)
      return
    end
    local base = gk.group .. group
    if redis.call('ZREM', base .. ':p', id) == 0 and redis.call('LREM', base .. ':w', 1, id) == 0 then return end
    redis.call('ZINCRBY', gk.backlog, -1, group)
    redis.call('DECR', gk.waiting)
    if group_size(gk, group) == 0 then redis.call('ZREM', gk.ready, group) end
    group_forget_if_idle(gk, group)
  elseif state == 'w' then
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
