-- The group of a record (header field 13, F_GROUP), or nil when the job has none; and its dedupe key
-- to release when it finishes (field 14, F_DEDUPE), or nil. One anchored match each: no header split.
-- long_header: whether the header reaches field 13 at all. Most records end at field 11 or 12 (no
-- group, dedupe, name, expireAt, batch or keep), and a failed anchored match costs ~0.6 us (its stars
-- backtrack), so the lookups of later fields (dedupe, expireAt, batch, keep) ask this first: one
-- match per record per script run (memoised by the record string), not one per field.
local GROUP_PATTERN = '^' .. string.rep('[^|\n]*|', 13) .. '([^|\n]*)'
local DEDUPE_PATTERN = '^' .. string.rep('[^|\n]*|', 14) .. '([^|\n]*)'
local GROUP_OF = {} -- @per-call: record -> its field 13, or false when the header ends before it
local function group_field(rec)
  local g = GROUP_OF[rec]
  if g == nil then
    g = string.match(rec, GROUP_PATTERN) or false
    GROUP_OF[rec] = g
  end
  return g
end
local function long_header(rec)
  return group_field(rec) ~= false
end
local function record_group(rec)
  local g = group_field(rec)
  if not g or g == '' then return nil end
  return g
end
local function record_dedupe(rec)
  if not long_header(rec) then return nil end
  local d = string.match(rec, DEDUPE_PATTERN)
  if d == '' then return nil end
  return d
end
