#!lua flags=allow-oom
-- release.lua: a worker hands back jobs it holds but never started (prefetched jobs at close or pause,
-- a job past its expiry before its slot freed): active -> waiting, at the FRONT of their priority
-- (they were next in line), attempts as they are, lease revoked (token cleared). Only while the job is
-- active under the caller's token and has no start mark: a lease already lost (recovered, cancelled)
-- or a job whose start was marked is left alone (its lease decides). No attempt error is recorded:
-- the processor never ran. The job stays in `expiring` if it has an expiry. (The claim's count in the
-- rate limiter window is not given back.)
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] active          ZSET
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] meta            HASH (field `starved`)
-- KEYS[7] events          STREAM lifecycle events
-- ARGV[1] wakeChannel     shard channel for idle workers
-- ARGV[2] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[3..] repeated: id, token
--   token: the fencing token the worker got with the job from claim
-- Returns: { id, ... } of the jobs handed back (the others' lease was no longer held)
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include record_group
-- @include group_leave
-- @include wake_starved
-- @include emit_event

local jobs, active, waiting, prio, seq = jobs_key, active_key, waiting_key, prio_key, seq_key
local CHUNK = 500 -- jobs per HMGET / HSET / ZREM (HSET takes 2 values per job: 1 000 values)
local n = (#ARGV - 2) / 2
local now = current_time('')
local released = {}
local woken = false
-- Chunks (and the jobs in each) are walked backwards, so that the front inserts leave the jobs in the
-- order the caller listed them (the order the claim returned them).
for first = math.floor((n - 1) / CHUNK) * CHUNK + 1, 1, -CHUNK do
  local last = math.min(first + CHUNK - 1, n)
  local ids = {}
  for i = first, last do ids[#ids + 1] = ARGV[3 + (i - 1) * 2] end
  local recs = redis.call('HMGET', jobs, unpack(ids))
  local updated, gone = {}, {}
  for j = #ids, 1, -1 do
    local rec = recs[j]
    if rec then
      local f, nl = parse_record(rec)
      local token = ARGV[4 + (first + j - 2) * 2]
      if f[F_STATE] == 'a' and f[F_TOKEN] == token and f[F_STARTED] == '' then
        f[F_STATE] = 'w'
        f[F_TOKEN] = ''
        updated[#updated + 1] = ids[j]
        updated[#updated + 1] = with_header(f, rec, nl)
        gone[#gone + 1] = ids[j]
        local group = record_group(rec)
        if group then group_leave(group_keys(jobs), group, 1, now) end
        if enqueue(waiting, prio, seq, ids[j], tonumber(f[F_PRIORITY]) or 0, true, group, now) then woken = true end
      end
    end
  end
  if #gone > 0 then
    redis.call('HSET', jobs, unpack(updated))
    redis.call('ZREM', active, unpack(gone))
    for k = 1, #gone do released[#released + 1] = gone[k] end
  end
end
if #released > 0 then
  wake_starved(meta_key, arg_wake_channel)
  emit_event(events_key, arg_events_max_len, 'released', released)
end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
return released
