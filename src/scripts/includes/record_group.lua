-- The group of a record (header field 13, F_GROUP), or nil when the job has none; its dedupe key
-- to release when it finishes (field 14, F_DEDUPE), or nil; and whether it is lifo (field 22, F_LIFO).
-- One anchored match each: no header split.
-- long_header: whether the header reaches field 13 at all. Most records end at field 11 or 12 (no
-- group, dedupe, name, expireAt, batch or keep), and a failed anchored match costs ~0.6 us (its stars
-- backtrack), so the lookups of later fields (dedupe, expireAt, batch, keep) ask this first: one
-- match per record per script run (memoised by the record string), not one per field.
local GROUP_PATTERN = '^' .. string.rep('[^|\n]*|', 13) .. '([^|\n]*)'
local DEDUPE_PATTERN = '^' .. string.rep('[^|\n]*|', 14) .. '([^|\n]*)'
local LIFO_PATTERN = '^' .. string.rep('[^|\n]*|', 22) .. '1[|\n]'
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
-- A caller whose own pattern has just read a record's early fields tells long_header what it can see
-- from where that match stopped: `from` is the position in `rec` where (0-based) field `field` starts.
-- Fewer than 13 - field more '|' before the newline: the header ends before field 13, noted as such.
-- The late fields are short or empty, so this costs a fraction of the full GROUP_PATTERN match it
-- saves, which rescans the token and the timestamps and backtracks through each (callgrind, 50 jobs
-- per call: complete.lua 56.7k -> 49.4k instructions per job).
local LATE_BARS = {} -- field -> the pattern of its remaining bars
local function note_header_end(rec, from, field)
  if GROUP_OF[rec] ~= nil then return end
  local p = LATE_BARS[field]
  if not p then
    p = '^' .. string.rep('[^|\n]*|', 13 - field)
    LATE_BARS[field] = p
  end
  if not string.find(rec, p, from) then GROUP_OF[rec] = false end
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
-- Whether job record `rec` was added with `lifo: true` (field 22 is '1'): for callers that have not
-- split the header (those that have read `f[F_LIFO] == '1'`).
local function record_lifo(rec)
  if not long_header(rec) then return false end
  return string.find(rec, LIFO_PATTERN) ~= nil
end
