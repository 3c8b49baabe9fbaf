-- HMGET of any number of fields, in slices of at most 1000 (unpack() fails near 8 000 values, see
-- chunked_call): the values in the order of `fields`, false for a missing field; {} for no fields.
local function chunked_hmget(key, fields)
  local n = #fields
  if n == 0 then return {} end
  if n <= 1000 then return redis.call('HMGET', key, unpack(fields)) end
  local out = {}
  for from = 1, n, 1000 do
    local part = redis.call('HMGET', key, unpack(fields, from, math.min(from + 999, n)))
    for i = 1, #part do out[from + i - 1] = part[i] end
  end
  return out
end
