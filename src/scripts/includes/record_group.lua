-- The group of a record (header field 13, F_GROUP), or nil when the job has none; and its dedupe key
-- to release when it finishes (field 14, F_DEDUPE), or nil. One anchored match each: no header split.
local GROUP_PATTERN = '^' .. string.rep('[^|\n]*|', 13) .. '([^|\n]*)'
local DEDUPE_PATTERN = '^' .. string.rep('[^|\n]*|', 14) .. '([^|\n]*)'
local function record_group(rec)
  local g = string.match(rec, GROUP_PATTERN)
  if g == '' then return nil end
  return g
end
local function record_dedupe(rec)
  local d = string.match(rec, DEDUPE_PATTERN)
  if d == '' then return nil end
  return d
end
