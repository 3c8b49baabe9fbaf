-- @include count_stats
-- @include blocked_moves
-- @include tag_key
-- @include child_ended
-- Dependencies: after parents finished, completed parents release their children (a child leaves the
-- blocked state once every parent completed: waiting, or delayed until its runAt), and dead parents
-- fail theirs with a DependencyFailedError, cascading to grandchildren, unless a child ignores
-- dependency failures (then a dead parent counts as done). `k` holds the key names (jobs, errors,
-- waiting, prio, seq, delayed, dead, deps, dependents) and channels (wake, done); idle workers and
-- waitFor are told. Returns the ids of children that died, and how many notifications for children
-- in other queues it queued (notify_cross).
-- deps: child -> `remaining|i or s`; dependents: parent -> children, newline-separated.
-- A parent settles a child only while that child is blocked and lists the parent among its own
-- (annex `child .. "\1d"`), and at most once: a link left behind by an earlier job of the same id
-- (failed by another parent, then trimmed or removed, and added anew) never moves the new job.
-- Needs count_stats (k.stats).

-- Children in other queues (dependsOn { queue, id }): every job of `ids` that has some in its
-- `xdependents` entry (lines `child tag \t child id \t this queue \t this partition \t link number`) queues one
-- notification per child in the `xnotify` outbox (member `outcome \t line \t parent id`, scored by
-- time), atomically with its end; a forwarder (src/queue/cross-queue.ts) delivers them to the
-- children's queues with cross-resolve.lua. `outcome` is 'c' (completed) or 'x' (dead). Both keys are
-- named from the hash tag: most queues have no such children. Returns the count queued.
local function notify_cross(k, now, ids, outcome)
  if #ids == 0 then return 0 end
  local xdependents = tag_key(k.jobs, 'xdependents')
  if redis.call('EXISTS', xdependents) == 0 then return 0 end
  local outbox, queued, members = tag_key(k.jobs, 'xnotify'), 0, {}
  for from = 1, #ids, 1000 do
    local last = math.min(from + 999, #ids)
    local lists = redis.call('HMGET', xdependents, unpack(ids, from, last))
    for i = 1, #lists do
      if lists[i] then
        local parent = ids[from + i - 1]
        redis.call('HDEL', xdependents, parent)
        for line in string.gmatch(lists[i], '[^\n]+') do
          members[#members + 1] = now
          members[#members + 1] = outcome .. '\t' .. line .. '\t' .. parent
          queued = queued + 1
        end
      end
    end
  end
  for from = 1, #members, 1000 do
    redis.call('ZADD', outbox, unpack(members, from, math.min(from + 999, #members)))
  end
  return queued
end

-- Children of job.addChildren (`waiters`: child id -> `parent tag \t parent id \t parent queue \t parent
-- createdAt \t child queue`): each
-- of `ids` that has an open entry ends it with `outcome` (a tombstone: the entry with the outcome
-- appended, indexed by time in `wended`), and its parent learns the outcome and the result
-- (`results[i]`, JSON, '' = undefined or none): at once when it shares this hash tag (child_ended),
-- else through the `wnotify` outbox (delivered by src/queue/children.ts with child-ended.lua).
-- Returns how many it queued in the outbox.
local function notify_waiters(k, now, ids, outcome, results)
  if #ids == 0 then return 0 end
  local base = string.sub(k.dependents, 1, -11)
  local waiters = base .. 'waiters'
  if redis.call('EXISTS', waiters) == 0 then return 0 end
  local tag, queued = string.sub(base, 1, -2), 0
  for from = 1, #ids, 1000 do
    local lines = redis.call('HMGET', waiters, unpack(ids, from, math.min(from + 999, #ids)))
    for i = 1, #lines do
      local ptag, pid, created, cqueue, done =
        string.match(lines[i] or '', '^([^\t]*)\t([^\t]*)\t[^\t]*\t([^\t]*)\t([^\t]*)(.*)$')
      if ptag and done == '' then
        local cid = ids[from + i - 1]
        local result = results and results[from + i - 1] or ''
        redis.call('HSET', waiters, cid, lines[i] .. '\t' .. outcome)
        redis.call('ZADD', base .. 'wended', now, cid)
        if ptag == tag then
          child_ended(k, pid, created, cqueue, cid, outcome, result, now)
        else
          redis.call('ZADD', base .. 'wnotify', now, ptag .. '\t' .. pid .. '\t' .. created .. '\t' .. cqueue
            .. '\t' .. cid .. '\t' .. outcome .. '\t' .. result)
          queued = queued + 1
        end
      end
    end
  end
  return queued
end

-- `results` (optional): the completed jobs' results, as `completed_ids` (for the parents of
-- job.addChildren's children, which keep them).
local function settle_dependents(k, now, completed_ids, dead_ids, results)
  -- Most queues have no dependencies: one integer reply instead of a table per call.
  -- (`xdependents` and `waiters` named from `dependents`, `{tag}:dependents`, by a cut: cheaper than
  -- tag_key's match on this path, which every completion takes.)
  local base = string.sub(k.dependents, 1, -11)
  if redis.call('EXISTS', k.dependents, base .. 'xdependents', base .. 'waiters') == 0 then return {}, 0 end
  local woken, later, failed = false, false, {}
  local pending = {}
  local function collect(ids, parent_failed)
    -- In chunks of 1000 ids (Lua's unpack limit is near 8000 values).
    for from = 1, #ids, 1000 do
      local lists = redis.call('HMGET', k.dependents, unpack(ids, from, math.min(from + 999, #ids)))
      for i = 1, #lists do
        if lists[i] then pending[#pending + 1] = { ids[from + i - 1], parent_failed, lists[i] } end
      end
    end
  end
  collect(completed_ids, false)
  collect(dead_ids, true)
  local n = 1
  while n <= #pending do
    local parent, parent_failed, children = pending[n][1], pending[n][2], pending[n][3]
    n = n + 1
    redis.call('HDEL', k.dependents, parent)
    local once = {}
    for child in string.gmatch(children, '[^\n]+') do
      local d = not once[child] and redis.call('HGET', k.deps, child)
      once[child] = true
      local rec = d and redis.call('HGET', k.jobs, child)
      local own = rec and string.sub(rec, 1, 1) == 'b' and redis.call('HGET', k.annex, child .. '\1d')
      if own and string.find('\n' .. own .. '\n', '\n' .. parent .. '\n', 1, true) then
        local sep = string.find(d, '|', 1, true)
        local remaining, ignore = tonumber(string.sub(d, 1, sep - 1)), string.sub(d, sep + 1) == 'i'
        if parent_failed and not ignore then
          fail_blocked(k, child, rec, parent, now)
          failed[#failed + 1] = child
          local grand = redis.call('HGET', k.dependents, child)
          if grand then pending[#pending + 1] = { child, true, grand } end
        elseif remaining > 1 then
          redis.call('HSET', k.deps, child, (remaining - 1) .. '|' .. (ignore and 'i' or 's'))
        else
          local state, woke = release_blocked(k, child, rec, now)
          if woke then woken = true end
          if state == 'd' then later = true end
        end
      end
    end
  end
  if woken then redis.call('SPUBLISH', k.wake, 'w') end
  if later then redis.call('SPUBLISH', k.wake, 'd') end
  if #failed > 0 then
    redis.call('SPUBLISH', k.done, 'x\n' .. table.concat(failed, '\n'))
    count_stats(k.stats, now, 'x', #failed)
  end
  local queued = notify_cross(k, now, completed_ids, 'c') + notify_cross(k, now, dead_ids, 'x')
    + notify_cross(k, now, failed, 'x')
    + notify_waiters(k, now, completed_ids, 'c', results) + notify_waiters(k, now, dead_ids, 'x')
    + notify_waiters(k, now, failed, 'x')
  return failed, queued
end
