#!lua flags=allow-oom
-- claim.lua: promote delayed jobs that are due (delayed -> waiting), then claim up to `count` jobs
-- for one worker (waiting -> active): negative priorities first, then the FIFO list, then positive
-- priorities. Each claimed job gets a fencing token unique in the queue's history (`<lease id>.<now>`:
-- a lease id drawn from the tokens counter, plus the claim time, because a failover that loses the last
-- writes rolls the counter back and would hand out a lease id again). Its lease deadline (now + leaseMs)
-- is its score in `active`. Nothing is counted here: a claimed job is leased with its attempts as they
-- are and an empty startedAt, and its worker marks the start when the processor runs (start.lua, or a
-- mark riding on complete.lua), so a job whose worker dies before that goes back free (recover.lua).
-- Any count works: multi-value commands go in slices of at most 1000 values.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] waiting         LIST
-- KEYS[3] prio            ZSET
-- KEYS[4] seq             STRING order counter of the prio zset (see includes/enqueue.lua)
-- KEYS[5] delayed         ZSET
-- KEYS[6] active          ZSET
-- KEYS[7] meta            HASH (fields `paused`, `concurrency`, `starved`, `rate`, `limited`: no claims
--                         before that time, set by fail.lua for a RateLimitError)
-- KEYS[8] limiter         STRING job starts in the current rate-limit window (expires with it)
-- KEYS[9] events          STREAM lifecycle events
-- KEYS[10] annex          HASH annex: large payloads (field id .. "\1b") among others
-- KEYS[11] claims         HASH claimer -> its last claim that leased jobs (includes/record_claim.lua)
-- KEYS[12] tokens         STRING counter of lease ids (the first part of fencing tokens); never reset
-- KEYS[13] queueLimiter   STRING job starts in the current window of the queue-wide rate limit
-- KEYS[14] idle           ZSET `<fetcher>|<nonce>|<unit>` -> deadline: one member per job a registered
--                         fetcher may be handed
--   (Expiry also uses the queue's `expiring`, `dead`, `deps`, `dependents` and `stats` keys, named
--   from the hash tag with includes/tag_key.lua: not in KEYS, as every key costs on each call.)
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] count           jobs wanted (0 = only promote)
-- ARGV[3] defaultLeaseMs
-- ARGV[4] limit           most delayed jobs promoted per call
-- ARGV[5] rateMax         job starts allowed per window across all workers (0 = no rate limit); the
--                         queue's stored limit (meta `rate`, queue.setRateLimit) replaces it when set
-- ARGV[6] rateWindowMs
-- ARGV[7] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[8] claimer         '' or the claiming worker's fetcher and claim slot: its field in `claims`
-- ARGV[9] nonce           this claim's number for `claimer`; `r<nonce>`: a retry of that claim
-- ARGV[10] freeSlots      the worker's free slots (jobs it can start at once), for the handoff
--                         registration below; '' = count
-- ARGV[11] fetcher        '' or the claiming fetcher's id, for handoffs (below)
-- ARGV[12] withdraw       '' or the nonce of this fetcher's registration for a handoff that may stand
-- ARGV[13] registerMs     > 0: when this claim leaves the worker free slots, register the fetcher for a
--                         handoff for that long (0 = do not)
-- ARGV[14] registerUnits  the most jobs the registration may be handed (the fetcher's share of the
--                         worker's free slots); the claim registers min(this, 1000, freeSlots - jobs claimed)
-- ARGV[15] withdrawUnits  the units of the registration withdrawn (what its claim answered)
-- ARGV[16] received       how many jobs of that registration reached the fetcher by message
-- Returns: { now, nextDue, paused, limitedMs, registered, replayed, id1, record1, id2, record2, ... }
--   A retry (same claimer and nonce as the claim recorded for claimer, whose reply the worker lost)
--   claims nothing new: it returns that claim's jobs still under its leases (includes/replay_claim.lua).
--   nextDue: when fewer than `count` were claimed, the earliest time more may become claimable (the
--     first delayed job, or a parked group's time), else ''
--   paused: 1 when the queue is paused (nothing is claimed), else 0
--   limitedMs: > 0 when the rate limit is reached (before or by this claim): the window reopens in that
--     many ms
--   registered: n > 0 when the fetcher now stands registered for n handoffs, else 0
--   replayed: the last `replayed` pairs are jobs handed off with the withdrawn registration (below), not
--     claimed by this call
-- Expiry: a job taken whose expireAt has passed and that never started is not leased: it ends dead
-- with an ExpiredError (includes/expire_jobs.lua), and when that leaves the claim short, nextDue is
-- `now` so the worker claims again at once. A leased job stays in `expiring` until its start mark. (The `wake` and `done`
-- channels are named from the hash tag, as keys.ts names them; dead retention is left to the next
-- transition that trims, so the claim's arguments stay as they were.)
-- The global concurrency limit (meta `concurrency`) caps active jobs across all workers; a claim cut
-- short by it sets meta `starved`, and the next completion anywhere wakes idle workers.
-- Groups (includes/group_claim.lua): jobs with a group wait in their group's own list; when groups
-- are ready, ungrouped jobs get the share of one more group, and the groups share the rest
-- round-robin under their own limits.
-- Handoff: a claim that comes back with fewer jobs than the worker can start now registers the fetcher
-- in `idle` for n jobs (members `<fetcher>|<nonce>|1` .. `|n`, until now + registerMs), and each of
-- the next plain adds takes one member, leases its job to the fetcher at once and sends it on the
-- fetcher's own channel (add-one.lua), recording the lease in `claims` under `<fetcher>.t`
-- (includes/record_handoff.lua). So an idle worker sends no claim per job: it claims again when most
-- of its units are used. The fetcher's next claim withdraws the registration (the members left); if
-- more jobs were handed off with it than reached the fetcher by message (a message may be lost or still
-- on its way), those still under their handoff's lease come back at the end of this claim's reply (the
-- worker keeps whichever copy arrives first), and the claim takes that many fewer jobs.
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include record_group
-- @include group_claim
-- @include active_sentinel
-- @include emit_event
-- @include body_marker
-- @include chunked_call
-- @include chunked_hmget
-- @include replay_claim
-- @include record_claim
-- @include group_leave
-- @include wake_starved
-- @include expire_jobs
-- @include tag_key
-- @include next_tokens
-- @include int_text
-- @include lease_record

local jobs, waiting, prio, seq, delayed, active, meta, limiter =
  jobs_key, waiting_key, prio_key, seq_key, delayed_key, active_key, meta_key, limiter_key
local now = current_time(arg_now)
local wanted = tonumber(arg_count)
local count = wanted

if arg_claimer ~= '' then
  local replay = replay_claim(jobs, annex_key, claims_key, arg_claimer, arg_nonce, now)
  if replay then return replay end
end

-- Units of one registration: the worker asks for at most 100 (worker/handoff.ts); this bounds what a
-- registration or withdrawal can cost (one member each, and unpack's limit near 8 000 values).
local MAX_UNITS = 1000
-- The withdrawn registration's handoffs that may not have reached the fetcher: every reply ends with
-- them (reply()), whatever else the claim answers.
local fetcher = arg_fetcher
local replayed, unseen = {}, 0
if arg_withdraw ~= '' then
  local units = math.min(tonumber(arg_withdraw_units) or 1, MAX_UNITS)
  local members = {}
  for u = 1, units do members[u] = fetcher .. '|' .. arg_withdraw .. '|' .. u end
  unseen = units - redis.call('ZREM', idle_key, unpack(members)) - (tonumber(arg_received) or 0)
  -- `<fetcher>.t`: the record of this version's add-one.lua; `<fetcher>.h`: the previous version's,
  -- times only (a rolling deploy may have producers of both).
  local r, old
  if unseen > 0 then
    r = replay_claim(jobs, annex_key, claims_key, fetcher .. '.t', 'r' .. arg_withdraw, now)
    old = replay_claim(jobs, annex_key, claims_key, fetcher .. '.h', 'r' .. arg_withdraw, now)
    r = r or old
    if old and r ~= old then for i = 7, #old do r[#r + 1] = old[i] end end
  end
  if r then
    for i = 7, #r do replayed[#replayed + 1] = r[i] end
    -- Each job not seen takes a slot of the worker's: claim that many fewer.
    unseen = math.min(unseen, #replayed / 2)
    count = math.max(0, count - unseen)
  else
    unseen = 0
  end
end
local function reply(out)
  out[6] = #replayed / 2
  for i = 1, #replayed do out[#out + 1] = replayed[i] end
  return out
end

-- Promotion happens here, atomically with claiming, so no dispatcher is needed and many workers
-- promoting the same due jobs can never duplicate one.
-- (EXISTS first, here and below: an integer reply costs Redis far less than an empty table, and most
-- claims find no delayed job, no meta hash and no parked group.)
-- Due jobs go before any job that became ready after them, ties in the order of their adds
-- (includes/enqueue.lua).
promote_due(jobs, waiting, prio, seq, delayed, now, tonumber(arg_limit))

local flags = redis.call('EXISTS', meta) == 1 and redis.call('HMGET', meta, 'paused', 'concurrency', 'rate', 'limited')
  or {}
if flags[1] then return reply({ now, '', 1, 0, 0, 0 }) end
-- A processor threw RateLimitError (fail.lua): no claims until then; the worker sleeps that long.
if flags[4] and count > 0 then
  local left = tonumber(flags[4]) - now
  if left > 0 then return reply({ now, '', 0, left, 0, 0 }) end
end
if flags[2] and count > 0 then
  local room = tonumber(flags[2]) - active_count(active)
  if room < count then
    count = math.max(room, 0)
    redis.call('HSET', meta, 'starved', '1')
  end
end
local rate_max, rate_window, limiter = tonumber(arg_rate_max), arg_rate_window_ms, limiter
if flags[3] then
  local m, w = string.match(flags[3], '^(%d+)|(%d+)$')
  rate_max, rate_window, limiter = tonumber(m), w, queue_limiter_key
end
if rate_max > 0 and count > 0 then
  local used = tonumber(redis.call('GET', limiter) or '0')
  if used >= rate_max then
    local ttl = redis.call('PTTL', limiter)
    return reply({ now, '', 0, ttl > 0 and ttl or 1, 0, 0 })
  end
  count = math.min(count, rate_max - used)
end

local ids
local gk = group_keys(jobs)
local grouped = count > 0 and redis.call('EXISTS', gk.ready, gk.parked) > 0
if not grouped then
  ids = count > 0 and take_from_pool(waiting, prio, count) or {}
else
  group_unpark(gk, now)
  local groups = redis.call('ZCARD', gk.ready)
  local plain = redis.call('EXISTS', waiting, prio) > 0
  ids = plain and take_from_pool(waiting, prio, groups > 0 and math.ceil(count / (groups + 1)) or count) or {}
  if #ids < count and groups > 0 then
    for _, id in ipairs(group_claim(gk, count - #ids, now)) do ids[#ids + 1] = id end
  end
  if plain and #ids < count then
    for _, id in ipairs(take_from_pool(waiting, prio, count - #ids)) do ids[#ids + 1] = id end
  end
end

-- Expiry (see the header): only a queue with expiring jobs (one EXISTS per claim) pays a lookup per
-- job. Every unstarted job with an expiry is in `expiring` (add.lua; a manual retry clears the expiry).
local recs = {}
local expired_ids, expired_recs = {}, {}
local expiring_key = tag_key(jobs, 'expiring')
if #ids > 0 and redis.call('EXISTS', expiring_key) == 0 then
  recs = chunked_hmget(jobs, ids)
elseif #ids > 0 then
  local all = chunked_hmget(jobs, ids)
  local kept = {}
  for i = 1, #ids do
    local rec = all[i]
    local e = rec and record_expire(rec)
    if e and is_expired(rec, now) then
      expired_ids[#expired_ids + 1] = ids[i]
      expired_recs[#expired_recs + 1] = rec
      local g = record_group(rec)
      if g then group_leave(gk, g, 1, now) end
    else
      kept[#kept + 1] = ids[i]
      recs[#kept] = rec
    end
  end
  ids = kept
end
if #expired_ids > 0 then
  local tag = string.match(jobs, '^({[^}]*}:)')
  expire_jobs({ jobs = jobs, annex = annex_key, waiting = waiting, prio = prio, seq = seq, delayed = delayed,
    dead = tag .. 'dead', deps = tag .. 'deps', dependents = tag .. 'dependents', events = events_key, stats = tag .. 'stats',
    expiring = expiring_key,
    wake = tag .. 'wake', done = tag .. 'done' }, expired_ids, expired_recs, now, { events_max = arg_events_max_len })
  wake_starved(meta, tag .. 'wake')
end

local limited_ms = 0
if rate_max > 0 and #ids > 0 then
  local used = redis.call('INCRBY', limiter, #ids)
  if used == #ids then redis.call('PEXPIRE', limiter, rate_window) end
  -- The window is now full: say when it reopens, so a worker left with free slots sleeps until then
  -- instead of until its next poll.
  if used >= rate_max then limited_ms = math.max(redis.call('PTTL', limiter), 1) end
end

local next_due = ''
if #ids < wanted then
  local first = redis.call('EXISTS', delayed) == 1 and redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES') or {}
  if first[2] then next_due = first[2] end
  local parked = redis.call('EXISTS', gk.parked) == 1 and redis.call('ZRANGE', gk.parked, 0, 0, 'WITHSCORES') or {}
  if parked[2] and (next_due == '' or tonumber(parked[2]) < tonumber(next_due)) then next_due = parked[2] end
  if #expired_ids > 0 then next_due = now end
end
local out = { now, next_due, 0, limited_ms, 0, 0 }
local units = math.min(tonumber(arg_register_units) or 1, MAX_UNITS, (tonumber(arg_free_slots) or wanted) - #ids - unseen)
if (tonumber(arg_register_ms) or 0) > 0 and units > 0 and #expired_ids == 0 then
  local deadline, prefix = now + tonumber(arg_register_ms), fetcher .. '|' .. string.match(arg_nonce, '^r?(.*)$') .. '|'
  local members = {}
  for u = 1, units do
    members[#members + 1] = deadline
    members[#members + 1] = prefix .. u
  end
  redis.call('ZADD', idle_key, unpack(members))
  out[5] = units
end
if #ids == 0 then return reply(out) end

local updated, leases = {}, {}
local default_lease = tonumber(arg_default_lease_ms)
local token = next_tokens(tokens_key, seq, #ids) - #ids
-- Formatting a number in Lua is a sprintf (~0.3 us): do it once per call, not per job.
local now_s = tostring(now)
-- The latest lease deadline, for record_claim.
local expiry = now
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
-- Records whose payload lives in the annex: the worker gets the record with the payload in place.
-- (string.byte compares bytes without creating a string per job: this loop runs on the hot path.)
local marked = {}
local MARKER_BYTE, NEWLINE_BYTE = string.byte(BODY_MARKER), 10
for j = 8, #out, 2 do -- out: now, nextDue, paused, limitedMs, registered, replayed, then id, record pairs
  local rec = out[j]
  if string.byte(rec, -1) == MARKER_BYTE and string.byte(rec, -2) == NEWLINE_BYTE then marked[#marked + 1] = j end
end
if #marked > 0 then
  local fields = {}
  for n = 1, #marked do fields[n] = out[marked[n] - 1] .. '\1b' end
  local bodies = chunked_hmget(annex_key, fields)
  for n = 1, #marked do
    local j = marked[n]
    out[j] = string.sub(out[j], 1, -2) .. (bodies[n] or 'null')
  end
end
if #updated > 0 then
  chunked_call('HSET', jobs, updated)
  redis.call('ZADD', active, 'NX', 'inf', ACTIVE_SENTINEL)
  chunked_call('ZADD', active, leases)
  emit_event(events_key, arg_events_max_len, 'active', ids)
end
record_claim(claims_key, arg_claimer, arg_nonce, now, out, expiry)
return reply(out)
