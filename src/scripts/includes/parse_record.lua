-- Header fields of a job record "header\ndata[\nresult]" (1-based; field n here is field n-1 in
-- src/store/job-record.ts). '' means the library default for the option fields.
local F_STATE, F_TOKEN, F_ATTEMPTS, F_BASE, F_CREATED, F_RUN_AT = 1, 2, 3, 4, 5, 6
local F_STARTED, F_FINISHED, F_PRIORITY, F_MAX_ATTEMPTS, F_LEASE = 7, 8, 9, 10, 11
local F_GROUP, F_DEDUPE, F_REFUNDS = 14, 15, 16
local F_NAME, F_EXPIRE, F_SNOOZES, F_BATCH, F_KEEP = 17, 18, 19, 20, 21
-- trace: the producer's trace context, written by the client at add and read only by workers; no
-- script reads it, every rewrite of the header keeps it (set_field, with_header).
local F_TRACE = 22
-- lifo: '1' when the job was added with `lifo: true` (it enters waiting at the front of its priority:
-- includes/enqueue.lua), else ''; written by the client at add, kept by every rewrite of the header.
local F_LIFO = 23
-- state: w d a c x; token: the fencing token (lease id) of the latest claim, '' once the lease is
-- revoked (recovered, cancelled, retried); attempts: starts (start marks, never given back); startedAt:
-- the start of the current lease ('' until its mark); base: starts not charged (those before the last
-- manual retry, plus snoozes and rate limits); refunds: leases lost unmarked that recover returned free.

-- Splits a record into its header fields and the position of the newline that ends the header.
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
