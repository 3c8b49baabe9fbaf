#!lua flags=allow-oom
-- bullmq-drop-scheduler.lua: removes a BullMQ job scheduler whose schedule the migration has just
-- created here (importFromBullMQ, src/migrate/), only while its next tick is still the one the caller
-- read (`millis`): BullMQ moves it on as its pending occurrence starts, and the caller then reads it
-- again. The pending occurrence (the job for `millis`) stays a BullMQ job: a BullMQ worker runs it, or
-- the migration moves it as it moves any job, so that tick runs once, in one system; the schedule here
-- starts at the tick after it. Only deletes, so it runs over maxmemory too.
-- KEYS[1] bullRepeat    ZSET scheduler id -> next tick (`<prefix>:<queue>:repeat`)
-- KEYS[2] bullScheduler HASH the scheduler (`...:repeat:<id>`)
-- ARGV[1] scheduler     the scheduler id
-- ARGV[2] millis        its next tick as read
-- Returns: 'dropped', 'changed' (its next tick moved on: nothing changed) or 'gone' (no such scheduler)

local millis = redis.call('ZSCORE', bull_repeat_key, arg_scheduler)
if not millis then return 'gone' end
if tonumber(millis) ~= tonumber(arg_millis) then return 'changed' end
redis.call('ZREM', bull_repeat_key, arg_scheduler)
redis.call('DEL', bull_scheduler_key)
return 'dropped'
