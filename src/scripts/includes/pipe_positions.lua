-- Fills `p` with the positions of the first `n` '|' in a record's header (p[k] ends field k), for
-- hot paths that read or rewrite a few fields in place: cheaper than splitting the whole header.
local function pipe_positions(rec, n, p)
  local pos = 0
  for k = 1, n do
    pos = string.find(rec, '|', pos + 1, true)
    p[k] = pos
  end
  return p
end
