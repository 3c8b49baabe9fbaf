#!lua flags=allow-oom
-- bullmq-drop-scheduler.lua: removes a BullMQ job scheduler whose schedule the migration has just
-- created here (importFromBullMQ, src/migrate/), with its pending occurrence if that is still delayed,
-- so no tick runs in both systems. Only while the scheduler's next tick is still the one the caller read
-- (`millis`): BullMQ moves it on as its occurrence starts, and the caller then reads it again. Only
-- deletes, so it runs over maxmemory too.
-- KEYS[1] bullRepeat    ZSET scheduler id -> next tick (`<prefix>:<queue>:repeat`)
-- KEYS[2] bullScheduler HASH the scheduler (`...:repeat:<id>`)
-- KEYS[3] bullDelayed   ZSET BullMQ's delayed jobs
-- KEYS[4] bullJob       HASH the pending occurrence (`...:repeat:<id>:<millis>`)
-- KEYS[5] bullLogs      LIST its log
-- ARGV[1] scheduler     the scheduler id
-- ARGV[2] millis        its next tick as read
-- ARGV[3] occurrence    the pending occurrence's job id (`repeat:<id>:<millis>`)
-- Returns: { outcome, occurrence }: outcome 'dropped', 'changed' (its next tick moved on: nothing
--   changed) or 'gone' (no such scheduler); occurrence 'removed' (it was delayed, and is gone with the
--   scheduler) or 'kept' (it had left the delayed set: it runs in BullMQ, or waits there for a pass
--   that moves jobs)

local millis = redis.call('ZSCORE', bull_repeat_key, arg_scheduler)
if not millis then return { 'gone', 'kept' } end
if tonumber(millis) ~= tonumber(arg_millis) then return { 'changed', 'kept' } end
redis.call('ZREM', bull_repeat_key, arg_scheduler)
redis.call('DEL', bull_scheduler_key)
if redis.call('ZREM', bull_delayed_key, arg_occurrence) == 1 then
  redis.call('DEL', bull_job_key, bull_logs_key)
  return { 'dropped', 'removed' }
end
return { 'dropped', 'kept' }
