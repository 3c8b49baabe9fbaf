-- @include group_keys
-- Needs group_keys. A group's limits: its override in `glimits` field by field over the queue's
-- default (meta `glimits`); each is `concurrency|rateMax|rateWindowMs`, '' = inherit, '-' = none.
-- Returns concurrency, rateMax, rateWindowMs (nil when unlimited). Read once per group per script
-- run (limits do not change inside one: set-group-limits writes before it reads).
local DEFAULT_GROUP_LIMITS = nil -- @per-call
local GROUP_LIMITS_SEEN = {} -- @per-call
local function group_limits(gk, group)
  local seen = GROUP_LIMITS_SEEN[group]
  if seen then return seen[1], seen[2], seen[3] end
  if DEFAULT_GROUP_LIMITS == nil then
    local d = redis.call('HGET', gk.meta, 'glimits') or '||'
    DEFAULT_GROUP_LIMITS = { string.match(d, '^([^|]*)|([^|]*)|([^|]*)$') }
  end
  local d = DEFAULT_GROUP_LIMITS
  local c, m, w = d[1], d[2], d[3]
  local own = redis.call('HGET', gk.limits, group)
  if own then
    local oc, om, ow = string.match(own, '^([^|]*)|([^|]*)|([^|]*)$')
    if oc ~= '' then c = oc end
    if om ~= '' then m, w = om, ow end
  end
  seen = { tonumber(c), tonumber(m), tonumber(w) }
  GROUP_LIMITS_SEEN[group] = seen
  return seen[1], seen[2], seen[3]
end

-- How many more jobs of `group` may start now: room under its concurrency and its rate window (a
-- large number when unlimited); when the rate window is full, the ms until it reopens; else the
-- starts left in the window (nil without a rate limit). `active`: the group's active count when the
-- caller knows it (nil: read it).
local function group_room(gk, group, active)
  local conc, rate_max = group_limits(gk, group)
  local room = 1e15
  if conc then room = conc - (active or tonumber(redis.call('HGET', gk.active, group) or '0')) end
  if rate_max and room > 0 then
    local key = gk.group .. group .. ':r'
    local used = tonumber(redis.call('GET', key) or '0')
    if used >= rate_max then
      local ttl = redis.call('PTTL', key)
      return 0, ttl > 0 and ttl or 1
    end
    room = math.min(room, rate_max - used)
    return room, nil, rate_max - used
  end
  return room, nil, nil
end
