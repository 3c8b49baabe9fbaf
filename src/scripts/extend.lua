#!lua flags=allow-oom
-- extend.lua: renew the leases of a worker's active jobs (new deadline: now + the job's leaseMs), in one
-- call per renewal interval. Only while the job is active under the same fencing token. Any number
-- of jobs per call: multi-value commands go in slices of at most 1000 values.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] active          ZSET
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] defaultLeaseMs
-- ARGV[3..] repeated: id, token
--   token: the fencing token the worker got with the job from claim
-- Returns: { id, ... } of jobs whose lease this worker no longer holds
-- @include current_time
-- @include parse_record
-- @include chunked_call
-- @include chunked_hmget

local jobs, active = jobs_key, active_key
local now = current_time(arg_now)
local default_lease = tonumber(arg_default_lease_ms)
local n = (#ARGV - 2) / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[3 + (i - 1) * 2] end
local recs = chunked_hmget(jobs, ids)
local lost, leases = {}, {}
for i = 1, n do
  local rec = recs[i]
  local held = false
  if rec then
    local f = parse_record(rec)
    if f[F_STATE] == 'a' and f[F_TOKEN] == ARGV[4 + (i - 1) * 2] then
      held = true
      leases[#leases + 1] = now + (tonumber(f[F_LEASE]) or default_lease)
      leases[#leases + 1] = ids[i]
    end
  end
  if not held then lost[#lost + 1] = ids[i] end
end
chunked_call('ZADD', active, leases, 'XX')
return lost
