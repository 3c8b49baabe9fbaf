-- The `active` zset keeps one permanent member, longer than zset-max-listpack-value (64 bytes) and
-- scored +inf, so Redis stores it as a skiplist from the start and never deletes the key: in its
-- small listpack encoding every member added or removed is a linear scan, which made batch claims
-- O(batch^2) (measured: ZADD 2.8 -> 1.0 us per job). A job id never contains control characters, so
-- it cannot collide; recovery reads scores below +inf and never sees it.
local ACTIVE_SENTINEL = '\1surety active-set sentinel: keeps this zset in skiplist encoding (not a job)'

-- Number of active jobs (the sentinel excluded).
local function active_count(active_key)
  return math.max(redis.call('ZCARD', active_key) - 1, 0)
end
