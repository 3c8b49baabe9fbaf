-- Retention for a finished set (completed or dead): removes jobs finished before now - max_age_ms,
-- else the oldest beyond max_count, at most `limit` per call, with their records and annex fields.
-- Needs annex_fields.
local function trim_finished(set_key, jobs_key, errors_key, now, max_count, max_age_ms, limit)
  local victims = redis.call('ZRANGEBYSCORE', set_key, '-inf', now - max_age_ms, 'LIMIT', 0, limit)
  if #victims == 0 then
    local excess = redis.call('ZCARD', set_key) - max_count
    if excess <= 0 then return 0 end
    victims = redis.call('ZRANGE', set_key, 0, math.min(excess, limit) - 1)
  end
  redis.call('ZREM', set_key, unpack(victims))
  redis.call('HDEL', jobs_key, unpack(victims))
  redis.call('HDEL', errors_key, unpack(annex_fields(victims)))
  return #victims
end
