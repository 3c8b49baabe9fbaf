-- Parses a schedule's entry in the schedulePending hash, `version|occurrence id|count[|ended]`:
-- version (number), the pending occurrence's id (for an ended schedule its last one, '' if none),
-- count (occurrences created so far; 0 in an entry written before counts existed), and ended (true once
-- the schedule produces nothing more: limit reached or next tick after endAt).
local function parse_pending(value)
  local version, id, count, ended = string.match(value, '^(%d+)|([^|]*)|?(%d*)|?(%a*)$')
  return tonumber(version), id, tonumber(count) or 0, ended == 'ended'
end
