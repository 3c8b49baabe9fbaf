-- @include int_text
-- Retention for a finished set (completed or dead): removes jobs finished more than max_age_ms ago,
-- then the oldest beyond max_count, at most `limit` per call, with their records and annex fields.
-- @include annex_fields
-- @include chunked_call
local function trim_finished(set_key, jobs_key, errors_key, now, max_count, max_age_ms, limit)
  -- The victims are the lowest ranks: first those finished before the age cut, then the count excess
  -- right after them. Counting both with integer replies costs two calls fewer than reading them (a
  -- complete runs this on every call). Several victims: ZRANGE then ZREM, not ZPOPMIN, whose reply
  -- formats each victim's score with a %.17g sprintf, more than the extra call costs. One victim (a
  -- complete of one job, the interactive path): ZPOPMIN, one call, one score.
  local aged = math.min(redis.call('ZCOUNT', set_key, '-inf', '(' .. int_text(now - max_age_ms)), limit)
  local excess = redis.call('ZCARD', set_key) - aged - max_count
  local n = aged + math.max(0, math.min(excess, limit - aged))
  if n <= 0 then return 0 end
  local victims
  if n == 1 then
    victims = { redis.call('ZPOPMIN', set_key)[1] }
  else
    victims = redis.call('ZRANGE', set_key, 0, n - 1)
    chunked_call('ZREM', set_key, victims)
  end
  chunked_call('HDEL', jobs_key, victims)
  -- Most queues have no annex at all (no errors, progress, logs or parents): skip 4 lookups per job.
  if redis.call('EXISTS', errors_key) == 1 then chunked_call('HDEL', errors_key, annex_fields(victims)) end
  return #victims
end
