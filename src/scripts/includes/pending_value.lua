-- A schedule's entry in the schedulePending hash (parse_pending reads it back). Counts stay below
-- 10^14, so Lua's 14-digit number formatting writes them exactly.
local function pending_value(version, id, count, ended)
  return version .. '|' .. id .. '|' .. count .. (ended and '|ended' or '')
end
