-- Sets header field `i` of the parsed fields `f` (parse_record) to `v`, padding the fields between the
-- end of a shorter header and `i` with '' (an older or shorter record), so table.concat sees no hole.
local function set_field(f, i, v)
  for k = #f + 1, i - 1 do f[k] = '' end
  f[i] = v
end
