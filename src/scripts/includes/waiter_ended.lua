-- @include tag_key
-- Child `cid` of job.addChildren (its `waiters` line `parent tag \t parent id \t parent queue \t parent
-- createdAt \t child queue`) ended
-- with `outcome` ('c' or 'x') and `result` (JSON, '' = undefined) outside settle_dependents (added
-- dead at once, or an existing job adopted after its end): the line becomes a tombstone (the outcome
-- appended, timed in `wended`) and the end goes to the parent through the `wnotify` outbox.
local function waiter_ended(waiters_key, cid, line, outcome, result, now)
  redis.call('HSET', waiters_key, cid, line .. '\t' .. outcome)
  redis.call('ZADD', tag_key(waiters_key, 'wended'), now, cid)
  local ptag, pid, created, cqueue = string.match(line, '^([^\t]*)\t([^\t]*)\t[^\t]*\t([^\t]*)\t(.*)$')
  redis.call('ZADD', tag_key(waiters_key, 'wnotify'), now, ptag .. '\t' .. pid .. '\t' .. created .. '\t' .. cqueue
    .. '\t' .. cid .. '\t' .. outcome .. '\t' .. result)
end
