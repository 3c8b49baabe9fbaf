-- @include group_limits
-- Needs group_keys and group_limits. Puts `group` in the rotation when it has waiting jobs, room
-- under its limits and is not parked; parks it until its rate window reopens when that is full.
-- Called wherever a group may have become runnable (a job of it enqueued, or one left `active`).
-- Returns true when it joined the rotation.
local function group_size(gk, group)
  return redis.call('LLEN', gk.group .. group .. ':w') + redis.call('ZCARD', gk.group .. group .. ':p')
end

local function group_wake(gk, group, now)
  if redis.call('ZSCORE', gk.ready, group) or redis.call('ZSCORE', gk.parked, group) then return false end
  if group_size(gk, group) == 0 then return false end
  local room, wait = group_room(gk, group)
  if wait then
    redis.call('ZADD', gk.parked, now + wait, group)
    return false
  end
  if room <= 0 then
    -- Concurrency full: the job that frees a slot calls this again (group_leave).
    redis.call('HSET', gk.meta, 'starved', '1')
    return false
  end
  redis.call('ZADD', gk.ready, redis.call('INCR', gk.turn), group)
  return true
end

-- A group with no waiting and no active job leaves the backlog index, so memory follows live groups.
local function group_forget(gk, group)
  redis.call('ZREM', gk.backlog, group)
  redis.call('ZREM', gk.ready, group)
  redis.call('DEL', gk.group .. group .. ':s')
end

local function group_forget_if_idle(gk, group)
  if redis.call('HEXISTS', gk.active, group) == 0 and group_size(gk, group) == 0 then group_forget(gk, group) end
end
