-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include append_errors
-- @include record_group
-- @include batch_settle
-- @include int_text
-- The two ways a blocked job whose parent finished leaves the blocked state, shared by
-- settle_dependents (a parent of the same queue) and cross-resolve.lua (a parent of another queue).
-- `k` holds the key names jobs, annex, waiting, prio, seq, delayed, dead and deps.

-- Blocked job `child` (record `rec`) has no parent left: waiting, or delayed until its runAt.
-- Returns 'w' (and whether idle workers must be woken) or 'd'.
local function release_blocked(k, child, rec, now)
  redis.call('HDEL', k.deps, child)
  local f, nl = parse_record(rec)
  local due = tonumber(f[F_RUN_AT])
  local woken = false
  if due and due > now then
    f[F_STATE] = 'd'
    redis.call('ZADD', k.delayed, due, child)
  else
    f[F_STATE] = 'w'
    local front = f[F_LIFO] == '1'
    woken = enqueue(k.waiting, k.prio, k.seq, child, tonumber(f[F_PRIORITY]) or 0, front, record_group(rec), now)
  end
  redis.call('HSET', k.jobs, child, with_header(f, rec, nl))
  return f[F_STATE], woken
end

-- Blocked job `child` (record `rec`) fails with a DependencyFailedError naming `parent` (a label: an
-- id, or `id of queue q`): dead, counted in its batch. Its own children are the caller's to settle.
local function fail_blocked(k, child, rec, parent, now)
  redis.call('HDEL', k.deps, child)
  local f, nl = parse_record(rec)
  f[F_STATE] = 'x'
  f[F_FINISHED] = now
  redis.call('HSET', k.jobs, child, with_header(f, rec, nl))
  append_errors(k.annex, { child }, {
    int_text(now) .. '|' .. f[F_ATTEMPTS] .. '|{"name":"DependencyFailedError","code":"ERR_DEPENDENCY_FAILED","message":"parent job '
      .. string.gsub(parent, '[\\"]', '\\%0') .. ' is dead"}',
  })
  redis.call('ZADD', k.dead, now, child)
  batch_settle(k.jobs, child, rec, false, now)
end
