#!lua
-- set-group-limits.lua: set or remove the default limits of every group (meta `glimits`) or one
-- group's override (`groupLimits`), then let groups that may now run back into the rotation. Limits
-- are `concurrency|rateMax|rateWindowMs`; in an override '' inherits the default and '-' means none.
-- Lowered limits need nothing more: claims drop groups that are over them (includes/group_claim.lua).
-- A group parked only by its rate window is looked at again at once (a raised or removed rate limit
-- lets it run now); one held behind a retry stays held while its concurrency is 1 (group_recheck).
-- Plain `#!lua`: over maxmemory it is refused before it runs (test/oom.test.ts).
-- KEYS[1] meta            HASH (field `glimits`)
-- KEYS[2] groupLimits     HASH group -> override
-- KEYS[3] groupBacklog    ZSET group -> waiting jobs (the groups to look at)
-- ARGV[1] group           '' = the default limits
-- ARGV[2] limits          the limits, or '' to remove them (the override, or every default limit)
-- ARGV[3] wakeFrom        '' on the first call, which writes the limits; with the default limits each
--                         call looks at 1000 groups of groupBacklog from this rank, and the caller
--                         repeats with the returned rank (later calls write nothing)
-- ARGV[4] wakeChannel
-- ARGV[5] now             epoch ms, '' = Redis TIME
-- Returns: the next wakeFrom, or 0 when every group has been looked at
-- @include current_time
-- @include group_hold
local now = current_time(arg_now)
local gk = group_keys(meta_key)
local group = arg_group
if arg_wake_from == '' then
  if group == '' then
    if arg_limits == '' then redis.call('HDEL', meta_key, 'glimits') else redis.call('HSET', meta_key, 'glimits', arg_limits) end
  elseif arg_limits == '' then
    redis.call('HDEL', group_limits_key, group)
  else
    redis.call('HSET', group_limits_key, group, arg_limits)
  end
end
local woken = false
local next_from = 0
if group ~= '' then
  woken = group_recheck(gk, group, now)
else
  local from = tonumber(arg_wake_from) or 0
  local batch = redis.call('ZRANGE', group_backlog_key, from, from + 999)
  for _, g in ipairs(batch) do
    if group_recheck(gk, g, now) then woken = true end
  end
  if #batch == 1000 then next_from = from + 1000 end
end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
return next_from
