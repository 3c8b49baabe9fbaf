#!lua
-- schedule.lua: create or replace the repeatable schedule `key`, and materialise its first occurrence
-- as a delayed job (id `schedule:<key>:<tick>`). Re-sending an identical spec changes nothing, so
-- applications can upsert their schedules at every start. A changed spec discards the pending
-- occurrence if it has not started (it no longer counts), and starts a new version. The count of
-- occurrences survives a replacement: a changed limit applies to the occurrences already created.
-- A schedule with no occurrence left (limit reached, or no tick before endAt) is stored ended.
-- KEYS[1] jobs              HASH id -> record
-- KEYS[2] annex             HASH annex: error lines, progress, logs
-- KEYS[3] waiting           LIST
-- KEYS[4] prio              ZSET
-- KEYS[5] seq               STRING
-- KEYS[6] delayed           ZSET
-- KEYS[7] schedules         HASH key -> spec JSON
-- KEYS[8] schedulePending   HASH key -> `version|pending occurrence id|count[|ended]`
-- ARGV[1] now               epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel
-- ARGV[3] key
-- ARGV[4] spec              JSON, compared as a string
-- ARGV[5] occurrenceId      id of the first regular occurrence, '' = none (its tick is after endAt)
-- ARGV[6] due               its due time (epoch ms)
-- ARGV[7] priority
-- ARGV[8] optionTail        the option fields of the occurrence jobs' header (job-record.ts)
-- ARGV[9] data              JSON
-- ARGV[10] limit            most occurrences in total, '' = no limit
-- ARGV[11] immediateId      id of the `immediately` occurrence, '' = none; used instead of ARGV[5]
--                           when the schedule has produced no occurrence yet
-- ARGV[12] immediateDue     its due time (epoch ms)
-- Returns: { version, changed (1|0) }
-- @include current_time
-- @include enqueue
-- @include create_job
-- @include annex_fields
-- @include unlink
-- @include discard_unstarted
-- @include parse_pending
-- @include pending_value

local jobs, annex, waiting, prio, seq, delayed, schedules, pending_key =
  jobs_key, annex_key, waiting_key, prio_key, seq_key, delayed_key, schedules_key, schedule_pending_key
local key = arg_key
local now = current_time(arg_now)
local version, last, count = 0, '', 0
local pending = redis.call('HGET', pending_key, key)
if pending then
  version, last, count = parse_pending(pending)
  if redis.call('HGET', schedules, key) == arg_spec then return { version, 0 } end
  if discard_unstarted(jobs, annex, waiting, prio, delayed, last) then
    count, last = count - 1, ''
  end
end
version = version + 1
redis.call('HSET', schedules, key, arg_spec)
local id, due = arg_occurrence_id, arg_due
if arg_immediate_id ~= '' and count == 0 then id, due = arg_immediate_id, arg_immediate_due end
local limit = tonumber(arg_limit)
if id == '' or (limit and count >= limit) then
  redis.call('HSET', pending_key, key, pending_value(version, last, count, true))
  return { version, 1 }
end
if redis.call('HEXISTS', jobs, id) == 0 then count = count + 1 end
redis.call('HSET', pending_key, key, pending_value(version, id, count, false))
if create_job(jobs, waiting, prio, seq, delayed, id, now, tonumber(due), tonumber(arg_priority), arg_option_tail, arg_data) then
  redis.call('SPUBLISH', arg_wake_channel, 'w')
else
  redis.call('SPUBLISH', arg_wake_channel, 'd')
end
return { version, 1 }
