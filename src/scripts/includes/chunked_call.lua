-- Runs `redis.call(cmd, key, [flag,] values...)` over the values of `list` in slices of at most 1000,
-- for every list whose size a caller controls: unpack() fails near 8 000 values ("too many results to
-- unpack"), and a script that fails after its first writes keeps them (Redis has no rollback), which
-- is how a claim of 4 000 jobs used to lose them. Slices have an even size, so field/value and
-- score/member pairs stay together. `flag` (optional) goes before the values (ZADD 'XX'). An empty
-- list sends nothing. Returns the sum of the integer replies, and the last reply (after RPUSH or
-- LPUSH: the list's length).
local function chunked_call(cmd, key, list, flag)
  local total, last = 0, nil
  local n = #list
  for from = 1, n, 1000 do
    local to = math.min(from + 999, n)
    if flag then
      last = redis.call(cmd, key, flag, unpack(list, from, to))
    else
      last = redis.call(cmd, key, unpack(list, from, to))
    end
    total = total + last
  end
  return total, last
end
