-- Whether the option tail of a job being added (header fields 8.. as the client writes them:
-- includes/new_record.lua, encodeOptionTail in job-record.ts) says lifo: field 22 (F_LIFO) is '1'.
-- It is the tail's last field when set, so a tail that does not end in '1' costs one byte read, and
-- only one that does is matched field by field (14 bars: fields 8..21 before it). Such a tail holds at
-- least 15 characters: callers test `#tail > 14` first, so a plain job's (`|||`) costs no call.
local TAIL_LIFO_PATTERN = '^' .. string.rep('[^|]*|', 14) .. '1$'
local function tail_lifo(tail)
  return string.byte(tail, -1) == 49 and string.find(tail, TAIL_LIFO_PATTERN) ~= nil
end
