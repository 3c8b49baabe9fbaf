-- Splits a job record "header\ndata[\nresult]" into its header fields (a 1-based table; field n here is
-- field n-1 in src/job-record.ts) and the position of the newline that ends the header:
--   1 state (w d a c x)  2 attempts (= fencing token)  3 base  4 createdAt  5 runAt  6 startedAt
--   7 finishedAt  8 priority  9 maxAttempts  10 leaseMs  11 backoff      ('' = default)
local function parse_record(rec)
  local nl = string.find(rec, '\n', 1, true)
  local f = {}
  local i = 1
  for v in string.gmatch(string.sub(rec, 1, nl - 1) .. '|', '([^|]*)|') do
    f[i] = v
    i = i + 1
  end
  return f, nl
end
