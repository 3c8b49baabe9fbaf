-- @include int_text
-- The record of a job leased under fencing token `token` (its text) at `now_s` (now as text):
-- started (`start` true: attempts + 1, startedAt = now) or reserved (attempts kept, startedAt empty,
-- begin.lua starts it). Returns the record and the job's own leaseMs (nil: the worker's default).
-- One pattern match reads attempts and leaseMs and cuts the record around the fields it rewrites
-- (state, token, attempts, startedAt), instead of splitting the whole header: claims run it per job.
-- state|token|(attempts)(|base|createdAt|runAt|)startedAt(|finishedAt|priority|maxAttempts|(leaseMs)|...)
local LEASE_PATTERN = '^[^|]*|[^|]*|([^|]*)(|[^|]*|[^|]*|[^|]*|)[^|]*(|[^|]*|[^|]*|[^|]*|([^|]*)|.*)$'
local function lease_record(rec, token, now_s, start)
  local attempts, mid, rest, lease = string.match(rec, LEASE_PATTERN)
  if start then return 'a|' .. token .. '|' .. int_text(tonumber(attempts) + 1) .. mid .. now_s .. rest, tonumber(lease) end
  return 'a|' .. token .. '|' .. attempts .. mid .. rest, tonumber(lease)
end
