-- The record of a job leased under fencing token `token` (its text): active, with its attempts as they
-- are and an empty startedAt (the worker's start mark counts the attempt: includes/mark_starts.lua).
-- Returns the record and the job's own leaseMs (nil: the worker's default). One pattern match reads
-- leaseMs and cuts the record around the fields it rewrites (state, token, startedAt), instead of
-- splitting the whole header: claims run it per job.
-- state|token|(attempts|base|createdAt|runAt|)startedAt(|finishedAt|priority|maxAttempts|(leaseMs)|...)
local LEASE_PATTERN = '^[^|]*|[^|]*|([^|]*|[^|]*|[^|]*|[^|]*|)[^|]*(|[^|]*|[^|]*|[^|]*|([^|]*)|.*)$'
local function lease_record(rec, token)
  local mid, rest, lease = string.match(rec, LEASE_PATTERN)
  return 'a|' .. token .. '|' .. mid .. rest, tonumber(lease)
end
