-- @include with_header
-- @include enqueue
-- @include count_stats
-- @include append_errors
-- @include parse_record
-- @include record_group
-- @include batch_settle
-- @include int_text
-- Dependencies: after parents finished, completed parents release their children (a child leaves the
-- blocked state once every parent completed: waiting, or delayed until its runAt), and dead parents
-- fail theirs with a DependencyFailedError, cascading to grandchildren, unless a child ignores
-- dependency failures (then a dead parent counts as done). `k` holds the key names (jobs, errors,
-- waiting, prio, seq, delayed, dead, deps, dependents) and channels (wake, done); idle workers and
-- waitFor are told. Returns the ids of children that died.
-- deps: child -> `remaining|i or s`; dependents: parent -> children, newline-separated.
-- A parent settles a child only while that child is blocked and lists the parent among its own
-- (annex `child .. "\1d"`), and at most once: a link left behind by an earlier job of the same id
-- (failed by another parent, then trimmed or removed, and added anew) never moves the new job.
-- Needs parse_record, with_header, enqueue, append_errors, count_stats (k.stats).
local function settle_dependents(k, now, completed_ids, dead_ids)
  -- Most queues have no dependencies: one integer reply instead of a table per call.
  if redis.call('EXISTS', k.dependents) == 0 then return {} end
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
        local f, nl = parse_record(rec)
        if parent_failed and not ignore then
          redis.call('HDEL', k.deps, child)
          f[F_STATE] = 'x'
          f[F_FINISHED] = now
          redis.call('HSET', k.jobs, child, with_header(f, rec, nl))
          append_errors(k.annex, { child }, {
            int_text(now) .. '|' .. f[F_ATTEMPTS] .. '|{"name":"DependencyFailedError","code":"ERR_DEPENDENCY_FAILED","message":"parent job '
              .. string.gsub(parent, '[\\"]', '\\%0') .. ' is dead"}',
          })
          redis.call('ZADD', k.dead, now, child)
          failed[#failed + 1] = child
          batch_settle(k.jobs, child, rec, false, now)
          local grand = redis.call('HGET', k.dependents, child)
          if grand then pending[#pending + 1] = { child, true, grand } end
        elseif remaining > 1 then
          redis.call('HSET', k.deps, child, (remaining - 1) .. '|' .. (ignore and 'i' or 's'))
        else
          redis.call('HDEL', k.deps, child)
          local due = tonumber(f[F_RUN_AT])
          if due and due > now then
            f[F_STATE] = 'd'
            redis.call('ZADD', k.delayed, due, child)
            later = true
          else
            f[F_STATE] = 'w'
            local front = f[F_LIFO] == '1'
            if enqueue(k.waiting, k.prio, k.seq, child, tonumber(f[F_PRIORITY]) or 0, front, record_group(rec), now) then woken = true end
          end
          redis.call('HSET', k.jobs, child, with_header(f, rec, nl))
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
  return failed
end
