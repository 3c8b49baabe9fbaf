#!lua flags=allow-oom
-- unschedule.lua: delete the schedule `key` (ended or not; its count goes with it) and its pending
-- occurrence if that has not started.
-- KEYS[1] jobs              HASH id -> record
-- KEYS[2] annex             HASH annex: error lines, progress, logs
-- KEYS[3] waiting           LIST
-- KEYS[4] prio              ZSET
-- KEYS[5] delayed           ZSET
-- KEYS[6] schedules         HASH key -> spec JSON
-- KEYS[7] schedulePending   HASH key -> `version|pending occurrence id|count[|ended]`
-- ARGV[1] key
-- Returns: 1 when the schedule existed, else 0
-- @include annex_fields
-- @include unlink
-- @include discard_unstarted
-- @include parse_pending

local jobs, annex, waiting, prio, delayed, schedules, pending_key = jobs_key, annex_key, waiting_key, prio_key, delayed_key, schedules_key, schedule_pending_key
local pending = redis.call('HGET', pending_key, arg_key)
if not pending then return 0 end
local _, id = parse_pending(pending)
discard_unstarted(jobs, annex, waiting, prio, delayed, id)
redis.call('HDEL', schedules, arg_key)
redis.call('HDEL', pending_key, arg_key)
return 1
