-- True when the job whose header fields are `f` may be attempted again. `base` is the attempt count
-- at the last manual retry, which grants a fresh budget of maxAttempts.
local function attempts_left(f, default_max)
  local max = tonumber(f[F_MAX_ATTEMPTS]) or default_max
  return (tonumber(f[F_ATTEMPTS]) - (tonumber(f[F_BASE]) or 0)) < max
end
