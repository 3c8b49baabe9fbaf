#!lua flags=allow-oom
-- change-delay.lua: a job that has not started is due `delayMs` from now, on Redis's clock
-- (queue.changeDelay). Delayed: due at the new time; with delayMs 0 it becomes waiting at once (at the
-- back of its priority, as promote does). Waiting: with delayMs > 0 it leaves the claim order (its
-- group's list too) and becomes delayed; with 0 it stays where it is. Blocked: its runAt changes, so
-- when its last parent completes it waits until then. Active, completed and dead jobs are refused.
-- A job parked waiting for a signal (wait-signal.lua) is parked no more: its wait's note goes, so a
-- signal of that name is only kept (the job meets its wait again when it runs), even when the new
-- due time happens to be the wait's deadline.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (field `\1w`: the wait a parked job is in)
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] delayed         ZSET
-- ARGV[1] now             epoch ms ('' = Redis clock)
-- ARGV[2] id
-- ARGV[3] delayMs         integer >= 0 (checked by the client)
-- ARGV[4] wakeChannel
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:<state letter>' (active, completed, dead)
-- A group held behind the delayed job (concurrency 1, includes/group_hold.lua) is held until its new
-- due time, or woken when it becomes waiting (going first in its group when it has started before,
-- as when it falls due). A lifo job that becomes waiting goes first in its priority.
-- @include parse_record
-- @include with_header
-- @include current_time
-- @include enqueue
-- @include record_group
-- @include unlink
-- @include announce_delayed
-- @include group_hold

local jobs, waiting, prio, seq, delayed = jobs_key, waiting_key, prio_key, seq_key, delayed_key
local id, wake = arg_id, arg_wake_channel
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local f, nl = parse_record(rec)
local state = f[F_STATE]
if state ~= 'w' and state ~= 'd' and state ~= 'b' then return 'INVALID_STATE:' .. state end
local now = current_time(arg_now)
local delay = tonumber(arg_delay_ms)
local due = now + delay
f[F_RUN_AT] = string.format('%.0f', due)
redis.call('HDEL', annex_key, id .. '\1w')
if state == 'b' or (state == 'w' and delay == 0) then
  redis.call('HSET', jobs, id, with_header(f, rec, nl))
  return 'OK'
end
if delay == 0 then
  -- delayed -> waiting
  redis.call('ZREM', delayed, id)
  f[F_STATE] = 'w'
  redis.call('HSET', jobs, id, with_header(f, rec, nl))
  local group = record_group(rec)
  local started = group ~= nil and (f[F_ATTEMPTS] ~= '0' or f[F_STARTED] ~= '')
  local woken = enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, started or f[F_LIFO] == '1', group, now)
  if group and group_unhold(group_keys(jobs), group, id, now) then woken = true end
  if woken then redis.call('SPUBLISH', wake, 'w') end
  return 'OK'
end
if state == 'w' then unlink({ jobs = jobs, waiting = waiting, prio = prio }, id, 'w', rec, now) end
f[F_STATE] = 'd'
redis.call('HSET', jobs, id, with_header(f, rec, nl))
redis.call('ZADD', delayed, due, id)
local group = state == 'd' and record_group(rec)
if group then group_unhold(group_keys(jobs), group, id, now, due) end
-- An earlier first due time than idle workers' timers know: tell them.
announce_delayed(delayed, wake, due)
return 'OK'
