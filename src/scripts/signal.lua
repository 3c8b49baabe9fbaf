#!lua
-- signal.lua: send signal `name` with a payload to job `id` (queue.signal). A job that has not ended
-- keeps it, in arrival order, in its annex field `id .. "\1g"` (lines `name \t json`) until a wait
-- for that name takes it (wait-signal.lua); a job parked waiting for this very name (annex
-- `id .. "\1w"`) goes from delayed to waiting in the same step. A job that has ended, or does not
-- exist, keeps nothing, and the reply says so. Plain `#!lua`: it adds data, so at maxmemory Redis
-- refuses it before it runs and nothing is half-written.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (fields `\1g` pending signals, `\1w` the job's wait)
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] delayed         ZSET
-- KEYS[7] events          STREAM lifecycle events
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] id
-- ARGV[3] name            the signal's name (no tab or newline: checked by the client)
-- ARGV[4] payload         JSON ('' = undefined)
-- ARGV[5] maxPending      the most signals one job may keep unconsumed
-- ARGV[6] wakeChannel     shard channel for idle workers
-- ARGV[7] eventsMaxLen    event stream cap (0 = no events)
-- Returns: { 'kept', state letter } (stored; the job does not wait for it now), { 'woke', 'w' }
--   (stored, and the parked job is waiting again), { 'ended', state letter } (completed or dead:
--   nothing stored), { 'missing', '' }, or { 'full', state letter } (maxPending signals unconsumed:
--   nothing stored)
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include record_group
-- @include emit_event

-- The due time of a parked job that waits without a deadline (wait-signal.lua).
local NEVER = 8640000000000000

local jobs, annex, id = jobs_key, annex_key, arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return { 'missing', '' } end
local f, nl = parse_record(rec)
local state = f[F_STATE]
if state == 'c' or state == 'x' then return { 'ended', state } end

local sig_field = id .. '\1g'
local pending = redis.call('HGET', annex, sig_field)
local count = 0
if pending then
  local _, lines = string.gsub(pending, '\n', '')
  count = lines + 1
end
if count >= tonumber(arg_max_pending) then return { 'full', state } end
local line = arg_name .. '\t' .. arg_payload
redis.call('HSET', annex, sig_field, pending and (pending .. '\n' .. line) or line)
emit_event(events_key, arg_events_max_len, 'signalled', { id })

-- Parked for this name: delayed at the wait's due time (a later retry or changeDelay is no wait).
local w = state == 'd' and redis.call('HGET', annex, id .. '\1w')
if not w or string.sub(w, 1, #arg_name + 1) ~= arg_name .. '\t' then return { 'kept', state } end
local deadline = tonumber(string.sub(w, #arg_name + 2))
if tonumber(f[F_RUN_AT]) ~= (deadline or NEVER) then return { 'kept', state } end
-- Parked for this signal: waiting again, first in its group and priority (it has started before).
local now = current_time(arg_now)
redis.call('HDEL', annex, id .. '\1w')
redis.call('ZREM', delayed_key, id)
f[F_STATE] = 'w'
f[F_RUN_AT] = now
redis.call('HSET', jobs, id, with_header(f, rec, nl))
local group = record_group(rec)
if enqueue(waiting_key, prio_key, seq_key, id, tonumber(f[F_PRIORITY]) or 0, true, group, now) then
  redis.call('SPUBLISH', arg_wake_channel, 'w')
end
return { 'woke', 'w' }
