-- @include record_group
-- @include annex_fields
-- @include chunked_call
-- A job's own retention (add option `keep`, record field 20: F_KEEP): 'c' = delete it as soon as it
-- completes, 'x' = as soon as it ends dead. Called after a transition put `ids` (with their records
-- as they were, `recs`) into the finished set `set_key`: the jobs whose keep field holds `letter` are
-- deleted with their annex, as retention would. One anchored match per record, and only records with
-- a header long enough to hold the field pay even that.
local KEEP_PATTERN = '^' .. string.rep('[^|\n]*|', 20) .. '([^|\n]*)'
local function drop_unkept(set_key, jobs_key, annex_key, ids, recs, letter)
  local drop = {}
  for i = 1, #ids do
    local keep = long_header(recs[i]) and string.match(recs[i], KEEP_PATTERN)
    if keep and string.find(keep, letter, 1, true) then drop[#drop + 1] = ids[i] end
  end
  if #drop == 0 then return end
  chunked_call('ZREM', set_key, drop)
  chunked_call('HDEL', jobs_key, drop)
  chunked_call('HDEL', annex_key, annex_fields(drop))
end
