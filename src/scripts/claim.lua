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
-- The stages, each in its include: withdraw the fetcher's last handoff registration
-- (includes/registration.lua), promote due jobs, the room the limits leave (claim_room.lua), take the
-- jobs (claim_take.lua: groups, and expired jobs that end dead instead), register the fetcher for
-- handoffs when the claim leaves the worker free slots (registration.lua), lease (claim_lease.lua),
-- and `drained` when the claim took the last waiting job (emit_drained.lua).
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
-- @include current_time
-- @include enqueue
-- @include replay_claim
-- @include record_claim
-- @include registration
-- @include claim_room
-- @include claim_take
-- @include claim_lease
-- @include emit_drained

local k = queue_keys
local now = current_time(arg_now)
local wanted = tonumber(arg_count)
local count = wanted

if arg_claimer ~= '' then
  local replay = replay_claim(k.jobs, k.annex, k.claims, arg_claimer, arg_nonce, now)
  if replay then return replay end
end

-- The withdrawn registration's handoffs that may not have reached the fetcher end every reply
-- (reply()), whatever else the claim answers; each takes one of the worker's slots.
local replayed, unseen = {}, 0
if arg_withdraw ~= '' then
  replayed, unseen = withdraw_registration(k, arg_fetcher, arg_withdraw, arg_withdraw_units, arg_received, now)
  count = math.max(0, count - unseen)
end
local function reply(out)
  out[6] = #replayed / 2
  for i = 1, #replayed do out[#out + 1] = replayed[i] end
  return out
end

-- Promotion happens here, atomically with claiming, so no dispatcher is needed and many workers
-- promoting the same due jobs can never duplicate one. Due jobs go before any job that became ready
-- after them, ties in the order of their adds (includes/enqueue.lua).
promote_due(k.jobs, k.waiting, k.prio, k.seq, k.delayed, now, tonumber(arg_limit))

local room = claim_room(k.meta, k.active, limiter_key, queue_limiter_key, count, now, arg_rate_max, arg_rate_window_ms)
if room.stop then return reply({ now, '', room.paused, room.limited_ms, 0, 0 }) end

local gk = group_keys(k.jobs)
local ids, recs, expired = drop_expired(k, gk, take_claimable(k, gk, room.count, now), now, arg_events_max_len)

local limited_ms = 0
if room.rate_max > 0 and #ids > 0 then
  local used = redis.call('INCRBY', room.limiter, #ids)
  if used == #ids then redis.call('PEXPIRE', room.limiter, room.rate_window) end
  -- The window is now full: say when it reopens, so a worker left with free slots sleeps until then
  -- instead of until its next poll.
  if used >= room.rate_max then limited_ms = math.max(redis.call('PTTL', room.limiter), 1) end
end

local next_due = ''
if #ids < wanted then
  local first = redis.call('EXISTS', k.delayed) == 1 and redis.call('ZRANGE', k.delayed, 0, 0, 'WITHSCORES') or {}
  if first[2] then next_due = first[2] end
  local parked = redis.call('EXISTS', gk.parked) == 1 and redis.call('ZRANGE', gk.parked, 0, 0, 'WITHSCORES') or {}
  if parked[2] and (next_due == '' or tonumber(parked[2]) < tonumber(next_due)) then next_due = parked[2] end
  -- Expired jobs left the claim short: the worker claims again at once.
  if expired > 0 then next_due = now end
end
local out = { now, next_due, 0, limited_ms, 0, 0 }
local units = math.min(tonumber(arg_register_units) or 1, MAX_UNITS, (tonumber(arg_free_slots) or wanted) - #ids - unseen)
if (tonumber(arg_register_ms) or 0) > 0 and units > 0 and expired == 0 then
  register_fetcher(k.idle, arg_fetcher, arg_nonce, units, now + tonumber(arg_register_ms))
  out[5] = units
end
if #ids == 0 then
  -- Only expired jobs were taken: they may have been the last waiting ones.
  if expired > 0 then emit_drained(k, gk, arg_events_max_len) end
  return reply(out)
end

local expiry = lease_jobs(k, ids, recs, now, tonumber(arg_default_lease_ms), out, arg_events_max_len)
emit_drained(k, gk, arg_events_max_len)
record_claim(k.claims, arg_claimer, arg_nonce, now, out, expiry)
return reply(out)
