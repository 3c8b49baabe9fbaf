-- Appends one error line per job (`lines[i]` for `ids[i]`) to the errors hash, in one read and one write.
local function append_errors(errors_key, ids, lines)
  if #ids == 0 then return end
  local old = redis.call('HMGET', errors_key, unpack(ids))
  local pairs_ = {}
  for i = 1, #ids do
    pairs_[#pairs_ + 1] = ids[i]
    pairs_[#pairs_ + 1] = old[i] and (old[i] .. '\n' .. lines[i]) or lines[i]
  end
  redis.call('HSET', errors_key, unpack(pairs_))
end
