-- @include active_sentinel
-- Claim stage (claim.lua): how many of `count` jobs the claim may take, under the queue's pause (meta
-- `paused`), a RateLimitError's pause (meta `limited`, set by fail.lua: no claims before that time),
-- the global concurrency limit (meta `concurrency`: a claim cut short by it sets meta `starved`, and
-- the next completion anywhere wakes idle workers) and the rate limit (the worker's, or the queue's
-- stored one, meta `rate`, which replaces it). Returns a table: `stop` true when the claim takes
-- nothing (then `paused` 1|0 and `limited_ms`, when the rate window reopens), else `count` and the
-- rate limit in force (`rate_max`, 0 = none; `rate_window`; `limiter`, the key counting its starts).
-- (EXISTS first: most queues have no meta hash, and an integer reply costs Redis far less than a table.)
local function claim_room(meta, active, limiter, queue_limiter, count, now, rate_max, rate_window)
  local flags = redis.call('EXISTS', meta) == 1 and redis.call('HMGET', meta, 'paused', 'concurrency', 'rate', 'limited')
    or {}
  if flags[1] then return { stop = true, paused = 1, limited_ms = 0 } end
  if flags[4] and count > 0 then
    local left = tonumber(flags[4]) - now
    if left > 0 then return { stop = true, paused = 0, limited_ms = left } end
  end
  if flags[2] and count > 0 then
    local room = tonumber(flags[2]) - active_count(active)
    if room < count then
      count = math.max(room, 0)
      redis.call('HSET', meta, 'starved', '1')
    end
  end
  local max, window = tonumber(rate_max), rate_window
  if flags[3] then
    local m, w = string.match(flags[3], '^(%d+)|(%d+)$')
    max, window, limiter = tonumber(m), w, queue_limiter
  end
  if max > 0 and count > 0 then
    local used = tonumber(redis.call('GET', limiter) or '0')
    if used >= max then
      local ttl = redis.call('PTTL', limiter)
      return { stop = true, paused = 0, limited_ms = ttl > 0 and ttl or 1 }
    end
    count = math.min(count, max - used)
  end
  return { stop = false, count = count, rate_max = max, rate_window = window, limiter = limiter }
end
