-- Appends one error line per job (`lines[i]` for `ids[i]`) to the errors hash, in one read and one write
-- (in slices of at most 1000 values).
-- @include chunked_call
-- @include chunked_hmget
local function append_errors(errors_key, ids, lines)
  if #ids == 0 then return end
  local old = chunked_hmget(errors_key, ids)
  local pairs_ = {}
  for i = 1, #ids do
    pairs_[#pairs_ + 1] = ids[i]
    pairs_[#pairs_ + 1] = old[i] and (old[i] .. '\n' .. lines[i]) or lines[i]
  end
  chunked_call('HSET', errors_key, pairs_)
end
