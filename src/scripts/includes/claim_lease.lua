-- @include chunked_call
-- @include chunked_hmget
-- @include active_sentinel
-- @include emit_event
-- @include body_marker
-- @include next_tokens
-- @include int_text
-- @include lease_record
-- Claim stage (claim.lua): leases the jobs taken (`ids`, their records `recs`) and appends each
-- (id, record) to the reply `out`. Each gets a fencing token unique in the queue's history
-- (`<lease id>.<now>`: a lease id drawn from the tokens counter, plus the claim time, because a
-- failover that loses the last writes rolls the counter back and would hand out a lease id again) and
-- its lease deadline (now + its leaseMs, else `default_lease`) as its score in `active`. Nothing is
-- counted: a leased job keeps its attempts and an empty startedAt until its worker's start mark.
-- A record whose payload lives in the annex goes to the worker with the payload in place. Returns
-- the latest lease deadline (for record_claim).
local function lease_jobs(k, ids, recs, now, default_lease, out, events_max)
  local updated, leases = {}, {}
  local token = next_tokens(k.tokens, k.seq, #ids) - #ids
  -- Formatting a number in Lua is a sprintf (~0.3 us): do it once per call, not per job.
  local now_s = tostring(now)
  local expiry = now
  local first = #out + 1
  for i = 1, #ids do
    local rec = recs[i]
    if rec then
      token = token + 1
      -- %d: exact for every integer up to 2^53 (plain concatenation turns 1e14 and above into 1e+14).
      local lease
      rec, lease = lease_record(rec, string.format('%d', token) .. '.' .. now_s)
      local deadline = now + (lease or default_lease)
      updated[#updated + 1] = ids[i]
      updated[#updated + 1] = rec
      if deadline > expiry then expiry = deadline end
      leases[#leases + 1] = int_text(deadline)
      leases[#leases + 1] = ids[i]
      out[#out + 1] = ids[i]
      out[#out + 1] = rec
    end
  end
  -- (string.byte compares bytes without creating a string per job: this loop runs on the hot path.)
  local marked = {}
  local MARKER_BYTE, NEWLINE_BYTE = string.byte(BODY_MARKER), 10
  for j = first + 1, #out, 2 do
    local rec = out[j]
    if string.byte(rec, -1) == MARKER_BYTE and string.byte(rec, -2) == NEWLINE_BYTE then marked[#marked + 1] = j end
  end
  if #marked > 0 then
    local fields = {}
    for n = 1, #marked do fields[n] = out[marked[n] - 1] .. '\1b' end
    local bodies = chunked_hmget(k.annex, fields)
    for n = 1, #marked do
      local j = marked[n]
      out[j] = string.sub(out[j], 1, -2) .. (bodies[n] or 'null')
    end
  end
  if #updated > 0 then
    chunked_call('HSET', k.jobs, updated)
    redis.call('ZADD', k.active, 'NX', 'inf', ACTIVE_SENTINEL)
    chunked_call('ZADD', k.active, leases)
    emit_event(k.events, events_max, 'active', ids)
  end
  return expiry
end
