-- The record `rec` (whose header ends at `nl`) with the header replaced by the fields `f`.
local function with_header(f, rec, nl)
  return table.concat(f, '|') .. string.sub(rec, nl)
end
