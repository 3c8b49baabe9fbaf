-- @include blocked_moves
-- @include parse_record
-- A child added by job.addChildren ended: its parent `pid` (of this queue's tag) records the outcome
-- in its annex field `pid .. "\1k"` (lines `child queue \t child id \t outcome \t result json`), once:
-- a second delivery of the same child's end changes nothing. A parent that completed or died records
-- it too: a retry runs it again, and its wait must find the ends that came meanwhile (the child's
-- tombstone never tells it twice). A parent parked for its children (wait-children.lua: blocked,
-- `deps` `open|w`) counts it off, and goes to waiting with its last child. `k` holds jobs, annex,
-- waiting, prio, seq, delayed and deps. `created`: the parent's creation time as the child knew it (a
-- later job of the same id is another parent, which takes nothing). Returns 'released', 'counted', or
-- 'none' (the parent is gone or another job, or knew of this end already).
local function child_ended(k, pid, created, cqueue, cid, outcome, result, now)
  local rec = redis.call('HGET', k.jobs, pid)
  if not rec then return 'none' end
  if parse_record(rec)[F_CREATED] ~= created then return 'none' end
  local state = string.sub(rec, 1, 1)
  local field = pid .. '\1k'
  local ended = redis.call('HGET', k.annex, field)
  local ref = cqueue .. '\t' .. cid .. '\t'
  if ended and string.find('\n' .. ended, '\n' .. ref, 1, true) then return 'none' end
  local line = ref .. outcome .. '\t' .. result
  redis.call('HSET', k.annex, field, ended and (ended .. '\n' .. line) or line)
  if state ~= 'b' then return 'counted' end
  local d = redis.call('HGET', k.deps, pid)
  if not d or string.sub(d, -2) ~= '|w' then return 'counted' end
  local open = tonumber(string.sub(d, 1, -3))
  if open > 1 then
    redis.call('HSET', k.deps, pid, (open - 1) .. '|w')
    return 'counted'
  end
  local _, woke = release_blocked(k, pid, rec, now)
  if woke then redis.call('SPUBLISH', k.wake, 'w') end
  return 'released'
end
