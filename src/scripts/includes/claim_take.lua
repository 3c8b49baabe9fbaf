-- @include group_claim
-- @include chunked_hmget
-- @include record_group
-- @include group_leave
-- @include expire_jobs
-- @include wake_starved
-- @include tag_key
-- Claim stages (claim.lua): which jobs a claim takes, then which of them may start.
-- take_claimable: up to `count` ids, negative priorities first, then the FIFO list, then positive
-- priorities. Groups (includes/group_claim.lua): jobs with a group wait in their group's own list;
-- when groups are ready, ungrouped jobs get the share of one more group, and the groups share the
-- rest round-robin under their own limits.
local function take_claimable(k, gk, count, now)
  if count <= 0 then return {} end
  if redis.call('EXISTS', gk.ready, gk.parked) == 0 then return take_from_pool(k.waiting, k.prio, count) end
  group_unpark(gk, now)
  local groups = redis.call('ZCARD', gk.ready)
  local plain = redis.call('EXISTS', k.waiting, k.prio) > 0
  local ids = plain and take_from_pool(k.waiting, k.prio, groups > 0 and math.ceil(count / (groups + 1)) or count)
    or {}
  if #ids < count and groups > 0 then
    for _, id in ipairs(group_claim(gk, count - #ids, now)) do ids[#ids + 1] = id end
  end
  if plain and #ids < count then
    for _, id in ipairs(take_from_pool(k.waiting, k.prio, count - #ids)) do ids[#ids + 1] = id end
  end
  return ids
end

-- drop_expired: the records of the ids taken, less the jobs past their expireAt that never started,
-- which are not leased: they end dead with an ExpiredError (includes/expire_jobs.lua). Only a queue
-- with expiring jobs (one EXISTS per claim) pays a lookup per job: every unstarted job with an expiry
-- is in `expiring` (add.lua; a manual retry clears the expiry). The `dead`, `deps`, `dependents`,
-- `stats`, `wake` and `done` names come from the hash tag, as keys.ts names them (dead retention is
-- left to the next transition that trims). Returns the ids kept, their records, and how many expired.
local function drop_expired(k, gk, ids, now, events_max)
  if #ids == 0 then return ids, {}, 0 end
  local expiring = tag_key(k.jobs, 'expiring')
  if redis.call('EXISTS', expiring) == 0 then return ids, chunked_hmget(k.jobs, ids), 0 end
  local all = chunked_hmget(k.jobs, ids)
  local kept, recs, expired_ids, expired_recs = {}, {}, {}, {}
  for i = 1, #ids do
    local rec = all[i]
    local e = rec and record_expire(rec)
    if e and is_expired(rec, now) then
      expired_ids[#expired_ids + 1] = ids[i]
      expired_recs[#expired_recs + 1] = rec
      local g = record_group(rec)
      if g then group_leave(gk, g, 1, now) end
    else
      kept[#kept + 1] = ids[i]
      recs[#kept] = rec
    end
  end
  if #expired_ids > 0 then
    local tag = string.match(k.jobs, '^({[^}]*}:)')
    expire_jobs({ jobs = k.jobs, annex = k.annex, waiting = k.waiting, prio = k.prio, seq = k.seq,
      delayed = k.delayed, dead = tag .. 'dead', deps = tag .. 'deps', dependents = tag .. 'dependents',
      events = k.events, stats = tag .. 'stats', expiring = expiring, wake = tag .. 'wake', done = tag .. 'done' },
      expired_ids, expired_recs, now, { events_max = events_max })
    wake_starved(k.meta, tag .. 'wake')
  end
  return kept, recs, #expired_ids
end
