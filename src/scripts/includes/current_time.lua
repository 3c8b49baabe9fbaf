-- Epoch ms: the caller's injected value (tests drive the clock this way), else the Redis server's
-- clock, so skewed worker clocks can neither expire leases early nor run jobs early.
local function current_time(injected)
  if injected ~= nil and injected ~= '' then return tonumber(injected) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
