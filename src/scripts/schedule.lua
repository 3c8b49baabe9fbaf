#!lua
-- schedule.lua: create or replace the repeatable schedule `key`, and materialise its first occurrence
-- as a delayed job (id `schedule:<key>:<tick>`). Re-sending an identical spec changes nothing, so
-- applications can upsert their schedules at every start. A changed spec discards the pending
-- occurrence if it has not started, and starts a new version.
-- KEYS[1] jobs              HASH id -> record
-- KEYS[2] annex             HASH annex: error lines, progress, logs
-- KEYS[3] waiting           LIST
-- KEYS[4] prio              ZSET
-- KEYS[5] seq               STRING
-- KEYS[6] delayed           ZSET
-- KEYS[7] schedules         HASH key -> spec JSON
-- KEYS[8] schedulePending   HASH key -> `version|pending occurrence id`
-- ARGV[1] now               epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel
-- ARGV[3] key
-- ARGV[4] spec              JSON, compared as a string
-- ARGV[5] occurrenceId      id of the first occurrence
-- ARGV[6] due               its due time (epoch ms)
-- ARGV[7] priority
-- ARGV[8] optionTail        the option fields of the occurrence jobs' header (job-record.ts)
-- ARGV[9] data              JSON
-- Returns: { version, changed (1|0) }
-- @include current_time
-- @include enqueue
-- @include create_job
-- @include annex_fields
-- @include unlink
-- @include discard_unstarted

local jobs, errors, waiting, prio, seq, delayed, schedules, pending_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local key = ARGV[3]
local now = current_time(ARGV[1])
local version = 0
local pending = redis.call('HGET', pending_key, key)
if pending then
  local sep = string.find(pending, '|', 1, true)
  version = tonumber(string.sub(pending, 1, sep - 1))
  if redis.call('HGET', schedules, key) == ARGV[4] then return { version, 0 } end
  discard_unstarted(jobs, errors, waiting, prio, delayed, string.sub(pending, sep + 1))
end
version = version + 1
redis.call('HSET', schedules, key, ARGV[4])
redis.call('HSET', pending_key, key, version .. '|' .. ARGV[5])
if create_job(jobs, waiting, prio, seq, delayed, ARGV[5], now, tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], ARGV[9]) then
  redis.call('SPUBLISH', ARGV[2], 'w')
else
  redis.call('SPUBLISH', ARGV[2], 'd')
end
return { version, 1 }
