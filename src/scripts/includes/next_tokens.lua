-- Draws `n` lease ids (the first part of fencing tokens, `<lease id>.<now>`) from the queue's `tokens`
-- counter and returns the last: the caller's ids are top - n + 1 .. top. A new tokens counter in a
-- queue whose lease ids came from `seq` (earlier versions) continues above them, so no id repeats.
local function next_tokens(tokens, seq, n)
  local top = redis.call('INCRBY', tokens, n)
  if top == n then
    local old = tonumber(redis.call('GET', seq) or '0')
    if old > 0 then top = redis.call('INCRBY', tokens, old) end
  end
  return top
end
