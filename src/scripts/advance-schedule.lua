#!lua
-- advance-schedule.lua: once an occurrence of a schedule has started (or finished), create the next
-- one(s). Compare-and-set on `version|current occurrence id`, so however many workers try to advance
-- the same tick, exactly one succeeds and each tick gets exactly one job (ids are per tick, too).
-- KEYS[1] jobs              HASH id -> record
-- KEYS[2] waiting           LIST
-- KEYS[3] prio              ZSET
-- KEYS[4] seq               STRING
-- KEYS[5] delayed           ZSET
-- KEYS[6] schedulePending   HASH key -> `version|pending occurrence id`
-- ARGV[1] now               epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel
-- ARGV[3] key
-- ARGV[4] expected          `version|current occurrence id`
-- ARGV[5] priority
-- ARGV[6] optionTail
-- ARGV[7] data              JSON
-- ARGV[8..] repeated: id, due
--   occurrences to create, oldest first (missed ticks to catch up, then the next tick); the last one
--   becomes the pending occurrence
-- Returns: 1 when advanced, 0 when someone else already did or the schedule changed or was removed
-- @include current_time
-- @include enqueue
-- @include create_job

local jobs, waiting, prio, seq, delayed, pending_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
if redis.call('HGET', pending_key, ARGV[3]) ~= ARGV[4] then return 0 end
local now = current_time(ARGV[1])
local version = string.sub(ARGV[4], 1, string.find(ARGV[4], '|', 1, true) - 1)
local woken, last = false, nil
for i = 8, #ARGV, 2 do
  if create_job(jobs, waiting, prio, seq, delayed, ARGV[i], now, tonumber(ARGV[i + 1]), tonumber(ARGV[5]), ARGV[6], ARGV[7]) then
    woken = true
  end
  last = ARGV[i]
end
redis.call('HSET', pending_key, ARGV[3], version .. '|' .. last)
redis.call('SPUBLISH', ARGV[2], woken and 'w' or 'd')
return 1
