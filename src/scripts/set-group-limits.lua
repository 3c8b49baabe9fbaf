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
local now = current_time(ARGV[5])
local gk = group_keys(KEYS[1])
local group = ARGV[1]
if ARGV[3] == '' then
  if group == '' then
    if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'glimits') else redis.call('HSET', KEYS[1], 'glimits', ARGV[2]) end
  elseif ARGV[2] == '' then
    redis.call('HDEL', KEYS[2], group)
  else
    redis.call('HSET', KEYS[2], group, ARGV[2])
  end
end
local woken = false
local next_from = 0
if group ~= '' then
  woken = group_recheck(gk, group, now)
else
  local from = tonumber(ARGV[3]) or 0
  local batch = redis.call('ZRANGE', KEYS[3], from, from + 999)
  for _, g in ipairs(batch) do
    if group_recheck(gk, g, now) then woken = true end
  end
  if #batch == 1000 then next_from = from + 1000 end
end
if woken then redis.call('SPUBLISH', ARGV[4], 'w') end
return next_from
