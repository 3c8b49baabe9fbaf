-- Retention for a finished set (completed or dead): removes jobs finished more than max_age_ms ago,
-- then the oldest beyond max_count, at most `limit` per call, with their records and annex fields.
-- @include annex_fields
-- @include chunked_call
local function trim_finished(set_key, jobs_key, errors_key, now, max_count, max_age_ms, limit)
  local victims = redis.call('ZRANGEBYSCORE', set_key, '-inf', '(' .. (now - max_age_ms), 'LIMIT', 0, limit)
  -- The age victims are the lowest ranks; the count excess continues right after them.
  local excess = redis.call('ZCARD', set_key) - #victims - max_count
  local extra = math.min(excess, limit - #victims)
  if extra > 0 then
    for _, id in ipairs(redis.call('ZRANGE', set_key, #victims, #victims + extra - 1)) do victims[#victims + 1] = id end
  end
  if #victims == 0 then return 0 end
  chunked_call('ZREM', set_key, victims)
  chunked_call('HDEL', jobs_key, victims)
  -- Most queues have no annex at all (no errors, progress, logs or parents): skip 4 lookups per job.
  if redis.call('EXISTS', errors_key) == 1 then chunked_call('HDEL', errors_key, annex_fields(victims)) end
  return #victims
end
