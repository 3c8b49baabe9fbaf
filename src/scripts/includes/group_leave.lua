-- @include group_limits
-- @include group_wake
-- @include group_hold
-- Needs group_keys, group_limits and group_wake. `n` jobs of `group` left `active` (finished, failed,
-- recovered, released, cancelled): free their slots and let the group back into the rotation.
-- When that puts the group back in the rotation, idle workers must look: the `starved` flag is set
-- for the caller's wake_starved, which runs after this (a flag set earlier may have been spent by
-- another completion meanwhile, and a full group is not in the rotation for a claim to notice).
-- (group_wake's steps, with the active count already known: this runs at every completion.)
local function group_leave(gk, group, n, now)
  local active = redis.call('HINCRBY', gk.active, group, -n)
  if active <= 0 then
    redis.call('HDEL', gk.active, group)
    active = 0
  end
  -- In the rotation: it has waiting jobs and will be served; nothing to do.
  if redis.call('ZSCORE', gk.ready, group) then return end
  if group_size(gk, group) == 0 then
    if active == 0 then group_forget(gk, group) end
    return
  end
  if redis.call('ZSCORE', gk.parked, group) then return end
  local room, wait = group_room(gk, group, active)
  if wait then
    redis.call('ZADD', gk.parked, now + wait, group)
  elseif room > 0 then
    redis.call('ZADD', gk.ready, redis.call('INCR', gk.turn), group)
  end
  -- Joined the rotation, or still full (limits lowered meanwhile): the next end of a job must wake.
  if not wait then redis.call('HSET', gk.meta, 'starved', '1') end
end
