#!lua
-- advance-schedule.lua: once an occurrence of a schedule has started (or finished), create the next
-- one(s). Compare-and-set on the whole pending entry (`version|current occurrence id|count`), so however
-- many workers try to advance the same tick, exactly one succeeds and each tick gets exactly one job (ids
-- are per tick, too). The count of occurrences is kept in the same entry, so a limit holds however many
-- workers race: once it is reached, or no tick is left before endAt (no rows), the schedule ends.
-- KEYS[1] jobs              HASH id -> record
-- KEYS[2] waiting           LIST
-- KEYS[3] prio              ZSET
-- KEYS[4] seq               STRING
-- KEYS[5] delayed           ZSET
-- KEYS[6] schedulePending   HASH key -> `version|pending occurrence id|count[|ended]`
-- ARGV[1] now               epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel
-- ARGV[3] key
-- ARGV[4] expected          the pending entry the caller read (current occurrence id)
-- ARGV[5] priority
-- ARGV[6] optionTail
-- ARGV[7] data              JSON
-- ARGV[8] limit             most occurrences in total, '' = no limit
-- ARGV[9..] repeated: id, due
--   occurrences to create, oldest first (missed ticks to catch up, then the next tick, none after
--   endAt); those past the limit are dropped; the last one created becomes the pending occurrence
-- Returns: 1 when advanced (or ended), 0 when someone else already did or the schedule changed, was
-- removed or has ended
-- @include current_time
-- @include enqueue
-- @include create_job
-- @include parse_pending
-- @include pending_value

local jobs, waiting, prio, seq, delayed, pending_key = jobs_key, waiting_key, prio_key, seq_key, delayed_key, schedule_pending_key
if redis.call('HGET', pending_key, arg_key) ~= arg_expected then return 0 end
local version, current, count, ended = parse_pending(arg_expected)
if ended then return 0 end
local now = current_time(arg_now)
local limit = tonumber(arg_limit)
local woken, last = false, nil
for i = 9, #ARGV, 2 do
  if limit and count >= limit then break end
  if redis.call('HEXISTS', jobs, ARGV[i]) == 0 then count = count + 1 end
  if create_job(jobs, waiting, prio, seq, delayed, ARGV[i], now, tonumber(ARGV[i + 1]), tonumber(arg_priority), arg_option_tail, arg_data) then
    woken = true
  end
  last = ARGV[i]
end
if not last then
  redis.call('HSET', pending_key, arg_key, pending_value(version, current, count, true))
  return 1
end
redis.call('HSET', pending_key, arg_key, pending_value(version, last, count, false))
redis.call('SPUBLISH', arg_wake_channel, woken and 'w' or 'd')
return 1
