-- True when the job whose header fields are `f` may be attempted again. `base` is the attempt count
-- at the last manual retry, which grants a fresh budget of maxAttempts.
local function attempts_left(f, default_max)
  local max = tonumber(f[9]) or default_max
  return (tonumber(f[2]) - (tonumber(f[3]) or 0)) < max
end
