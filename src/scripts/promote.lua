#!lua flags=allow-oom
-- promote.lua: make one delayed job due now (delayed -> waiting).
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] waiting         LIST
-- KEYS[3] prio            ZSET
-- KEYS[4] seq             STRING
-- KEYS[5] delayed         ZSET
-- KEYS[6] events          STREAM lifecycle events
-- ARGV[1] id
-- ARGV[2] wakeChannel
-- ARGV[3] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[4] now             epoch ms, '' = Redis TIME
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:<state letter>'
-- A grouped job that has started before (a retry or a snoozed job) goes first in its group, as when it
-- falls due, and a lifo job first in its priority; a group held behind it (concurrency 1) is woken (includes/group_hold.lua).
-- @include parse_record
-- @include with_header
-- @include current_time
-- @include enqueue
-- @include record_group
-- @include emit_event
-- @include group_hold

local jobs, waiting, prio, seq, delayed = jobs_key, waiting_key, prio_key, seq_key, delayed_key
local id = arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local f, nl = parse_record(rec)
if f[F_STATE] ~= 'd' then return 'INVALID_STATE:' .. f[F_STATE] end
local now, group = current_time(arg_now), record_group(rec)
-- Jobs already due go first, in due order: this one too when it is due (it keeps its place among
-- them, as if it had been promoted at its due time).
local woken = promote_due(jobs, waiting, prio, seq, delayed, now, 1000) > 0
if string.sub(redis.call('HGET', jobs, id), 1, 1) == 'd' then
  redis.call('ZREM', delayed, id)
  f[F_STATE] = 'w'
  redis.call('HSET', jobs, id, with_header(f, rec, nl))
  local started = group ~= nil and (f[F_ATTEMPTS] ~= '0' or f[F_STARTED] ~= '')
  local front = started or f[F_LIFO] == '1'
  if enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, front, group, now) then woken = true end
end
if group and group_unhold(group_keys(jobs), group, id, now) then woken = true end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
emit_event(events_key, arg_events_max_len, 'promoted', { id })
return 'OK'
