-- @include group_limits
-- @include group_wake
-- Needs group_keys, group_limits and group_wake. Holds: a group parked for a reason other than its
-- rate window, recorded in `gheld` (group -> `until|id`) so that a change which ends the hold early
-- wakes the group at once instead of at the old time. Two kinds: behind job `id` (a retry or snooze
-- under concurrency 1, until its due time: per-group FIFO across retries), and, with id '', a
-- processor's RateLimitError until `until`. A group keeps one hold, the one that ends last; its
-- `gparked` score is never before that hold's end. A parked group without a hold waits only for its
-- rate window, which set-group-limits may reopen (group_recheck).

-- Parks `group` until `untl` (epoch ms) for a hold behind job `id` ('' = a RateLimitError).
local function group_pause(gk, group, untl, id)
  redis.call('ZREM', gk.ready, group)
  local held = redis.call('HGET', gk.held, group)
  local prev = held and tonumber(string.match(held, '^(%d+)|'))
  if not prev or untl >= prev then redis.call('HSET', gk.held, group, string.format('%d', untl) .. '|' .. id) end
  redis.call('ZADD', gk.parked, 'GT', untl, group)
end

-- Job `id` of `group` fails or snoozes and waits until `due`: under concurrency 1 the group keeps the
-- job's place, so it is held until then and the job goes first in its list when due.
local function group_hold(gk, group, due, id)
  if group_limits(gk, group) ~= 1 then return end
  group_pause(gk, group, due, id)
end

-- Delayed job `id` of `group` is now due at `due` (changeDelay, debounce), or left `delayed`
-- (`due` nil: promoted, removed, cancelled, drained). When the group is held behind it, the hold moves
-- to the new due time, or ends and the group is woken (group_wake parks it again if its rate window is
-- full). Returns true when the group joined the rotation: idle workers must be woken.
local function group_unhold(gk, group, id, now, due)
  local held = redis.call('HGET', gk.held, group)
  if not held or string.match(held, '^%d+|(.*)$') ~= id then return false end
  if due and due > now then
    redis.call('HSET', gk.held, group, string.format('%d', due) .. '|' .. id)
    redis.call('ZADD', gk.parked, due, group)
    return false
  end
  redis.call('HDEL', gk.held, group)
  redis.call('ZREM', gk.parked, group)
  local woken = group_wake(gk, group, now)
  if not woken then group_forget_if_idle(gk, group) end
  return woken
end

-- `group`'s limits changed: a group parked only by its rate window is looked at again at once (the
-- window may be larger now, or gone); a hold stays, except one behind a job once the group's
-- concurrency is no longer 1 (no order to keep). Returns true when the group joined the rotation.
local function group_recheck(gk, group, now)
  if redis.call('ZSCORE', gk.parked, group) then
    local held = redis.call('HGET', gk.held, group)
    if held then
      local untl, id = string.match(held, '^(%d+)|(.*)$')
      untl = tonumber(untl)
      if untl > now and (id == '' or group_limits(gk, group) == 1) then
        -- Parked until the hold ends; its rate window is looked at then (group_unpark).
        redis.call('ZADD', gk.parked, untl, group)
        return false
      end
      redis.call('HDEL', gk.held, group)
    end
    redis.call('ZREM', gk.parked, group)
  end
  return group_wake(gk, group, now)
end
