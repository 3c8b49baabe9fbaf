-- @include group_limits
-- @include group_wake
-- @include chunked_call
-- Takes up to `need` jobs from the groups, round-robin: the groups that waited longest in the
-- rotation each give one job per round, as far as their limits allow, until `need` is met. A group
-- that got jobs goes to the back of the rotation if it can run more, is parked until its rate window
-- reopens, or leaves the rotation until a slot frees (group_leave). Entries that can no longer run
-- (limits lowered, jobs removed) are dropped on the way. Returns the ids in claim order.
local function take_from_pool(waiting_key, prio_key, n)
  local ids = {}
  local has_prio = redis.call('EXISTS', prio_key) == 1
  if has_prio then
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', prio_key, '-inf', '(0', 'LIMIT', 0, n)) do ids[#ids + 1] = id end
  end
  local from_prio = #ids
  if #ids < n then
    local popped = redis.call('LPOP', waiting_key, n - #ids)
    if popped then for _, id in ipairs(popped) do ids[#ids + 1] = id end end
  end
  if has_prio and #ids < n then
    for _, id in ipairs(redis.call('ZRANGE', prio_key, from_prio, from_prio + n - #ids - 1)) do ids[#ids + 1] = id end
  end
  -- List ids are not in prio; ZREM ignores them.
  if has_prio then chunked_call('ZREM', prio_key, ids) end
  return ids
end

-- Parked groups whose time has come rejoin the rotation (or are parked again). Their holds have
-- ended too (a parked score is never before its hold's end: includes/group_hold.lua).
local function group_unpark(gk, now)
  local due = redis.call('ZRANGEBYSCORE', gk.parked, '-inf', now, 'LIMIT', 0, 1000)
  if #due == 0 then return end
  chunked_call('HDEL', gk.held, due)
  for _, g in ipairs(due) do
    redis.call('ZREM', gk.parked, g)
    group_wake(gk, g, now)
  end
end

local function group_claim(gk, need, now)
  local out = {}
  -- A few passes: a pass that met only stale entries drops them and looks again.
  for _ = 1, 4 do
    if need <= 0 then break end
    local cand = redis.call('ZRANGE', gk.ready, 0, need - 1)
    if #cand == 0 then break end
    local live, caps, sizes, rooms, rate_left = {}, {}, {}, {}, {}
    for _, g in ipairs(cand) do
      local room, wait, left = group_room(gk, g)
      local size = group_size(gk, g)
      if size == 0 then
        group_forget_if_idle(gk, g)
        redis.call('ZREM', gk.ready, g)
      elseif wait then
        redis.call('ZREM', gk.ready, g)
        redis.call('ZADD', gk.parked, now + wait, g)
      elseif room <= 0 then
        redis.call('ZREM', gk.ready, g)
        redis.call('HSET', gk.meta, 'starved', '1')
      else
        live[#live + 1] = g
        caps[#caps + 1] = math.min(room, size)
        sizes[#live], rooms[#live], rate_left[#live] = size, room, left or false
      end
    end
    -- Deal `need` out one per group per round.
    local takes, left, dealt = {}, need, true
    for i = 1, #live do takes[i] = 0 end
    while left > 0 and dealt do
      dealt = false
      for i = 1, #live do
        if left > 0 and takes[i] < caps[i] then
          takes[i] = takes[i] + 1
          left = left - 1
          dealt = true
        end
      end
    end
    for i, g in ipairs(live) do
      if takes[i] > 0 then
        local base = gk.group .. g
        local ids = take_from_pool(base .. ':w', base .. ':p', takes[i])
        local got = #ids
        for _, id in ipairs(ids) do out[#out + 1] = id end
        need = need - got
        redis.call('HINCRBY', gk.active, g, got)
        redis.call('ZINCRBY', gk.backlog, -got, g)
        redis.call('DECRBY', gk.waiting, got)
        local _, rate_max, window = group_limits(gk, g)
        local key = base .. ':r'
        if rate_max and redis.call('INCRBY', key, got) == got then redis.call('PEXPIRE', key, window) end
        -- Back of the rotation after being served, or out of it: emptied, rate window used up
        -- (parked until it reopens), or full (the end of one of its jobs brings it back).
        if sizes[i] - got <= 0 then
          redis.call('ZREM', gk.ready, g)
        elseif rate_left[i] and rate_left[i] - got <= 0 then
          redis.call('ZREM', gk.ready, g)
          redis.call('ZADD', gk.parked, now + math.max(redis.call('PTTL', key), 1), g)
        elseif rooms[i] - got <= 0 then
          redis.call('ZREM', gk.ready, g)
          redis.call('HSET', gk.meta, 'starved', '1')
        else
          redis.call('ZADD', gk.ready, redis.call('INCR', gk.turn), g)
        end
      end
    end
  end
  return out
end
