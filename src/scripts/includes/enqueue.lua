-- Makes job `id` claimable. Priority 0 goes to the waiting list (at the back, or the front when
-- `front`); other priorities to the prio zset, FIFO within a priority via the seq counter.
-- Returns true when that structure was empty before: idle workers must then be woken.
local function enqueue(waiting_key, prio_key, seq_key, id, priority, front)
  if priority == 0 then
    return redis.call(front and 'LPUSH' or 'RPUSH', waiting_key, id) == 1
  end
  local seq = redis.call('INCR', seq_key) % 4294967296
  redis.call('ZADD', prio_key, priority * 4294967296 + seq, id)
  return redis.call('ZCARD', prio_key) == 1
end
