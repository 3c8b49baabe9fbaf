#!lua flags=allow-oom
-- begin.lua: a worker starts jobs it holds RESERVED (claimed by claim.lua as prefetch, beyond its free
-- slots): the attempt is counted now (attempts + 1, startedAt = now), just before the processor runs,
-- and the lease is renewed (now + the job's leaseMs). Only while the job is active under the caller's
-- token. Idempotent: a job already begun under that token (its startedAt is set) is left as it is and
-- reported held, so a worker that lost the reply sends the same call again. Any number of jobs per
-- call: multi-value commands go in slices of at most 1000 values.
-- Expiry: a reserved job whose expireAt has passed is not begun: it leaves `active` (freeing its group
-- slot), ends dead with an ExpiredError (includes/expire_jobs.lua) and is reported lost, so the
-- worker does not run it. A job begun here leaves `expiring`. (The `wake` and `done` channels are named
-- from the hash tag, as keys.ts names them; dead retention is left to the next transition that trims.)
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] active          ZSET
--   (Expiry also uses the queue's annex, waiting, prio, seq, delayed, dead, deps, dependents, meta,
--   events, stats and expiring keys, named from the hash tag with includes/tag_key.lua: not in KEYS,
--   as every key costs on each call and expiry is the rare path.)
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] defaultLeaseMs
-- ARGV[3] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[4..] repeated: id, token
--   token: the fencing token the worker got with the job from claim
-- Returns: { id, ... } of jobs whose lease this worker no longer holds (not begun: do not run them)
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include chunked_call
-- @include chunked_hmget
-- @include record_group
-- @include group_leave
-- @include wake_starved
-- @include expire_jobs
-- @include tag_key
-- @include int_text

local jobs, active = KEYS[1], KEYS[2]
local now = current_time(ARGV[1])
local default_lease = tonumber(ARGV[2])
local FIXED = 3
local n = (#ARGV - FIXED) / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[FIXED + 1 + (i - 1) * 2] end
local recs = chunked_hmget(jobs, ids)
-- Expiry, as in claim.lua: only a queue with expiring jobs (one EXISTS per call) pays a lookup per job
-- (a record without expireAt costs a failed match of its whole header; callgrind, 50 jobs per call:
-- 46.9k -> 33.9k instructions per job).
local expiring_key = tag_key(jobs, 'expiring')
local expiring = n > 0 and redis.call('EXISTS', expiring_key) == 1
local lost, leases, updated = {}, {}, {}
local expired_ids, expired_recs, begun_expiring = {}, {}, {}
-- The hot path: one match reads state, token, attempts, startedAt and leaseMs and cuts the record
-- around the fields to rewrite, as claim.lua does (a full header split per job cost ~5 us here).
-- state|token|attempts(|base|createdAt|runAt|)startedAt(|finishedAt|priority|maxAttempts|(leaseMs)|...)
local BEGIN_PATTERN = '^([^|]*)|([^|]*)|([^|]*)(|[^|]*|[^|]*|[^|]*|)([^|]*)(|[^|]*|[^|]*|[^|]*|([^|]*)|.*)$'
local now_s = tostring(now)
for i = 1, n do
  local rec = recs[i]
  local held = false
  if rec then
    local st, tok, attempts, mid, started, rest, lease = string.match(rec, BEGIN_PATTERN)
    local f, nl
    if not st then
      -- A header too short for the pattern: split it.
      f, nl = parse_record(rec)
      st, tok, started, lease = f[F_STATE], f[F_TOKEN], f[F_STARTED], f[F_LEASE]
    end
    if st == 'a' and tok == ARGV[FIXED + 2 + (i - 1) * 2] and started == '' and expiring and is_expired(rec, now) then
      redis.call('ZREM', active, ids[i])
      local group = record_group(rec)
      if group then group_leave(group_keys(jobs), group, 1, now) end
      expired_ids[#expired_ids + 1] = ids[i]
      expired_recs[#expired_recs + 1] = rec
    elseif st == 'a' and tok == ARGV[FIXED + 2 + (i - 1) * 2] then
      held = true
      if started == '' then
        if expiring and (record_expire(rec) or 0) > 0 then begun_expiring[#begun_expiring + 1] = ids[i] end
        local begun
        if f then
          f[F_STARTED] = now
          f[F_ATTEMPTS] = (tonumber(f[F_ATTEMPTS]) or 0) + 1
          begun = with_header(f, rec, nl)
        else
          begun = 'a|' .. tok .. '|' .. int_text((tonumber(attempts) or 0) + 1) .. mid .. now_s .. rest
        end
        updated[#updated + 1] = ids[i]
        updated[#updated + 1] = begun
      end
      leases[#leases + 1] = int_text(now + (tonumber(lease) or default_lease))
      leases[#leases + 1] = ids[i]
    end
  end
  if not held then lost[#lost + 1] = ids[i] end
end
chunked_call('HSET', jobs, updated)
chunked_call('ZADD', active, leases, 'XX')
chunked_call('ZREM', expiring_key, begun_expiring)
if #expired_ids > 0 then
  local tag = string.match(jobs, '^({[^}]*}:)')
  expire_jobs({ jobs = jobs, errors = tag .. 'errors', waiting = tag .. 'waiting', prio = tag .. 'prio',
    seq = tag .. 'seq', delayed = tag .. 'delayed', dead = tag .. 'dead', deps = tag .. 'deps',
    dependents = tag .. 'dependents', events = tag .. 'events', stats = tag .. 'stats',
    expiring = tag .. 'expiring', wake = tag .. 'wake', done = tag .. 'done' },
    expired_ids, expired_recs, now, { events_max = tonumber(ARGV[3]) })
  wake_starved(tag .. 'meta', tag .. 'wake')
end
return lost
