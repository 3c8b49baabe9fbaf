-- @include group_keys
-- @include group_wake
-- @include parse_record
-- @include with_header
-- @include record_group
-- @include chunked_call
-- @include chunked_hmget
-- Makes job `id` claimable. Priority 0 goes to the waiting list (at the back, or the front when
-- `front`: a job put back unstarted or rate-limited, a grouped retry, or a lifo job, F_LIFO, wherever
-- it becomes waiting). Other priorities go to the prio zset, scored priority * 2^32 + 2^31 + n at the back or
-- - n at the front, n drawn from the order counter `seq`: inside a priority, back inserts stay FIFO
-- and each front insert goes before the earlier ones (like LPUSH).
-- A score is only exact below 2^53, and priorities (up to +/- 10^6) take 21 of those bits, so n must
-- stay below 2^31 to keep every score exact and inside its priority's band. The counter counts prio
-- inserts only (lease ids have their own counter, `tokens`), restarts at 1 whenever the zset is
-- empty, and when it would reach 2^31 with jobs still waiting (2^31 inserts without the zset ever
-- emptying: days at 10 000 prioritised jobs/s) the zset is renumbered first: each priority's
-- members, in order, get the offsets -m/2 .. m/2 (m: that priority's count) and the counter continues
-- from the zset's size N. That costs O(N log N) in one call, once per 2^31 - N inserts.
-- Zsets scored by earlier versions (offsets from a counter shared with lease ids, taken modulo 2^31)
-- stay in order: while that counter is below 2^31 their offsets are below it too, and once it has
-- passed 2^31 the first insert renumbers them in their current order.
-- Returns true when that structure was empty before: idle workers must then be woken.
local function enqueue_in(waiting_key, prio_key, seq_key, id, priority, front)
  if priority == 0 then
    return redis.call(front and 'LPUSH' or 'RPUSH', waiting_key, id) == 1
  end
  local BAND, HALF = 4294967296, 2147483648 -- 2^32 per priority; offsets stay within +/- 2^31
  local empty = redis.call('EXISTS', prio_key) == 0
  local n
  if empty then
    local current = tonumber(redis.call('GET', seq_key) or '0')
    if current ~= 1 then redis.call('INCRBY', seq_key, string.format('%d', 1 - current)) end
    n = 1
  else
    n = redis.call('INCR', seq_key)
    if n >= HALF or n < 1 then
      -- Renumber: read every member in score order (slices of 1000, nothing written meanwhile).
      local size = redis.call('ZCARD', prio_key)
      local flat = {}
      for from = 0, size - 1, 1000 do
        local part = redis.call('ZRANGE', prio_key, from, from + 999, 'WITHSCORES')
        for i = 1, #part do flat[#flat + 1] = part[i] end
      end
      -- A priority's members are contiguous; its band is floor(score / 2^32) (exact: a power of two).
      local args = {}
      local i = 1
      while i <= #flat do
        local band = math.floor(tonumber(flat[i + 1]) / BAND)
        local j = i
        while j + 2 <= #flat and math.floor(tonumber(flat[j + 3]) / BAND) == band do j = j + 2 end
        local offset = -math.floor((j - i) / 4) -- (j - i) / 2 + 1 members: offsets -m/2 .. m/2
        for k = i, j, 2 do
          args[#args + 1] = band * BAND + HALF + offset
          args[#args + 1] = flat[k]
          offset = offset + 1
        end
        i = j + 2
      end
      for from = 1, #args, 1000 do redis.call('ZADD', prio_key, unpack(args, from, math.min(from + 999, #args))) end
      redis.call('INCRBY', seq_key, string.format('%d', size + 1 - n))
      n = size + 1
    end
  end
  if front then n = -n end
  redis.call('ZADD', prio_key, priority * BAND + HALF + n, id)
  return empty
end

-- Job `id` of `group` becomes claimable in its group's own list or prio zset (ordered like the
-- queue's), and the group joins the rotation if it can run (group_wake). True: wake idle workers.
local function enqueue_grouped(waiting_key, prio_key, seq_key, id, priority, front, group, now)
  local gk = group_keys(waiting_key)
  local base = gk.group .. group
  enqueue_in(base .. ':w', base .. ':p', base .. ':s', id, priority, front)
  redis.call('ZINCRBY', gk.backlog, 1, group)
  redis.call('INCR', gk.waiting)
  return group_wake(gk, group, now)
end

-- Promotion (delayed -> waiting) of the jobs due by `now`, at most `limit`, at most once per script
-- run, before any other job of the run is made claimable. A due job belongs before every job that
-- became ready after its due time, and promotion is lazy (no dispatcher runs at the due time), so
-- every transition that makes a job claimable promotes first: claim.lua, and every caller of enqueue
-- or of a plain RPUSH (add.lua, add-one.lua). Then each list or zset holds its jobs in the order they
-- became ready: due time, then insertion. Jobs due at the same moment go in the order they were added
-- (createdAt, then id: shorter first, then by text, so generated ids go in number order), not in the
-- text order of their ids that the delayed zset gives ties. A retry of a grouped job goes first in
-- its group (per-group FIFO across retries), and a lifo job (F_LIFO) goes first in its priority: it
-- became ready last. A queue without delayed jobs pays one EXISTS per run;
-- one with delayed jobs none of which is due, an O(log n) ZRANGEBYSCORE.
-- Returns how many jobs were promoted (the caller wakes idle workers when that is > 0).
local PROMOTED_DUE = false -- @per-call
local function promote_due(jobs, waiting, prio, seq, delayed, now, limit)
  if PROMOTED_DUE then return 0 end
  PROMOTED_DUE = true
  if redis.call('EXISTS', delayed) == 0 then return 0 end
  local flat = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  if #flat == 0 then return 0 end
  local due, scores = {}, {}
  for i = 1, #flat, 2 do
    due[#due + 1] = flat[i]
    scores[#due] = flat[i + 1]
  end
  chunked_call('ZREM', delayed, due)
  local recs = chunked_hmget(jobs, due)
  -- Ties (the same due time) in the order of their adds.
  local order, tied = {}, false
  for i = 1, #due do
    order[i] = i
    if i > 1 and scores[i] == scores[i - 1] then tied = true end
  end
  if tied then
    local created = {}
    for i = 1, #due do
      created[i] = recs[i] and tonumber(string.match(recs[i], '^[^|]*|[^|]*|[^|]*|[^|]*|([^|]*)')) or 0
    end
    table.sort(order, function(x, y)
      local sx, sy = tonumber(scores[x]), tonumber(scores[y])
      if sx ~= sy then return sx < sy end
      if created[x] ~= created[y] then return created[x] < created[y] end
      if #due[x] ~= #due[y] then return #due[x] < #due[y] end
      return due[x] < due[y]
    end)
  end
  local updated, to_list = {}, {}
  for _, i in ipairs(order) do
    local id, rec = due[i], recs[i]
    if rec then
      local f, nl = parse_record(rec)
      f[F_STATE] = 'w'
      updated[#updated + 1] = id
      updated[#updated + 1] = with_header(f, rec, nl)
      local priority = tonumber(f[F_PRIORITY]) or 0
      local group = record_group(rec)
      local lifo = f[F_LIFO] == '1'
      if group then
        -- A retry goes first in its group (per-group FIFO across retries); so does a lifo job.
        enqueue_grouped(waiting, prio, seq, id, priority, lifo or f[F_ATTEMPTS] ~= '0', group, now)
      elseif priority == 0 and not lifo then
        to_list[#to_list + 1] = id
      else
        -- A lifo job goes to the front: of the jobs promoted together, the last due is first.
        enqueue_in(waiting, prio, seq, id, priority, lifo)
      end
    end
  end
  chunked_call('HSET', jobs, updated)
  chunked_call('RPUSH', waiting, to_list)
  return #updated / 2
end

-- Job `id` of `group` (nil: none) becomes claimable: in the queue's list or prio zset, or its group's
-- (enqueue_grouped). Jobs due by `now` are promoted first (promote_due; callers that pass no `now`
-- have promoted already). Returns true when idle workers must be woken.
local function enqueue(waiting_key, prio_key, seq_key, id, priority, front, group, now)
  local promoted = 0
  if now and not PROMOTED_DUE then
    local tag = string.match(waiting_key, '^({[^}]*}:)')
    promoted = promote_due(tag .. 'jobs', waiting_key, prio_key, seq_key, tag .. 'delayed', now, 1000)
  end
  local woken
  if not group then
    woken = enqueue_in(waiting_key, prio_key, seq_key, id, priority, front)
  else
    woken = enqueue_grouped(waiting_key, prio_key, seq_key, id, priority, front, group, now)
  end
  return woken or promoted > 0
end
