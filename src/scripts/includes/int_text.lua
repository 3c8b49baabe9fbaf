-- An integer as text, formatted once per value and call. Lua's own conversion (tostring, `..` on a
-- number) is a %.14g sprintf, and redis.call turns a number argument into text with %.17g: both take
-- printf's floating-point path, which callgrind put at a tenth of Redis's instructions in a worker's
-- life cycle (every lease score, every completed score, every attempt count). '%d' takes the integer
-- path, and the values repeat within a call (one lease deadline per leaseMs, most jobs on the same
-- attempt), so the cache formats each once. Exact for every integer up to 2^53.
local INT_TEXT = {} -- @per-call: number -> its text
local function int_text(n)
  local t = INT_TEXT[n]
  if not t then
    t = string.format('%d', n)
    INT_TEXT[n] = t
  end
  return t
end
