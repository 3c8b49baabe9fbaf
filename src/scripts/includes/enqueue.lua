-- Makes job `id` claimable. Priority 0 goes to the waiting list (at the back, or the front when
-- `front`); other priorities to the prio zset with score priority * 2^32 + 2^31 +/- seq: the back of a
-- priority counts up from the middle of its band, the front counts down, so both stay FIFO-consistent
-- (each front insert goes before the previous ones, like LPUSH).
-- Returns true when that structure was empty before: idle workers must then be woken.
local function enqueue(waiting_key, prio_key, seq_key, id, priority, front)
  if priority == 0 then
    return redis.call(front and 'LPUSH' or 'RPUSH', waiting_key, id) == 1
  end
  local seq = redis.call('INCR', seq_key) % 2147483648
  if front then seq = -seq end
  redis.call('ZADD', prio_key, priority * 4294967296 + 2147483648 + seq, id)
  return redis.call('ZCARD', prio_key) == 1
end
