#!lua flags=allow-oom
-- begin.lua: a worker starts jobs it holds RESERVED (claimed by claim.lua as prefetch, beyond its free
-- slots): the attempt is counted now (attempts + 1, startedAt = now), just before the processor runs,
-- and the lease is renewed (now + the job's leaseMs). Only while the job is active under the caller's
-- token. Idempotent: a job already begun under that token (its startedAt is set) is left as it is and
-- reported held, so a worker that lost the reply sends the same call again. Any number of jobs per
-- call: multi-value commands go in slices of at most 1000 values.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] active          ZSET
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] defaultLeaseMs
-- ARGV[3..] repeated: id, token
--   token: the fencing token the worker got with the job from claim
-- Returns: { id, ... } of jobs whose lease this worker no longer holds (not begun: do not run them)
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include chunked_call
-- @include chunked_hmget

local jobs, active = KEYS[1], KEYS[2]
local now = current_time(ARGV[1])
local default_lease = tonumber(ARGV[2])
local n = (#ARGV - 2) / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[3 + (i - 1) * 2] end
local recs = chunked_hmget(jobs, ids)
local lost, leases, updated = {}, {}, {}
for i = 1, n do
  local rec = recs[i]
  local held = false
  if rec then
    local f, nl = parse_record(rec)
    if f[F_STATE] == 'a' and f[F_TOKEN] == ARGV[4 + (i - 1) * 2] then
      held = true
      if f[F_STARTED] == '' then
        f[F_STARTED] = now
        f[F_ATTEMPTS] = (tonumber(f[F_ATTEMPTS]) or 0) + 1
        updated[#updated + 1] = ids[i]
        updated[#updated + 1] = with_header(f, rec, nl)
      end
      leases[#leases + 1] = now + (tonumber(f[F_LEASE]) or default_lease)
      leases[#leases + 1] = ids[i]
    end
  end
  if not held then lost[#lost + 1] = ids[i] end
end
chunked_call('HSET', jobs, updated)
chunked_call('ZADD', active, leases, 'XX')
return lost
