#!lua
-- retry.lua: give a dead (or completed) job a fresh budget of attempts and make it waiting again
-- (dead|completed -> waiting). Its attempt count (the fencing token) keeps increasing; `base` records
-- where the new budget starts. Earlier errors are kept; a stored result is dropped.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] waiting         LIST
-- KEYS[3] prio            ZSET
-- KEYS[4] seq             STRING
-- KEYS[5] completed       ZSET
-- KEYS[6] dead            ZSET
-- KEYS[7] events          STREAM lifecycle events
-- ARGV[1] id
-- ARGV[2] wakeChannel
-- ARGV[3] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[4] now             epoch ms, '' = Redis TIME
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:<state letter>'
-- @include parse_record
-- @include current_time
-- @include enqueue
-- @include record_group
-- @include emit_event
-- @include batch_settle

local jobs, waiting, prio, seq, completed, dead = jobs_key, waiting_key, prio_key, seq_key, completed_key, dead_key
local id = arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local f, nl = parse_record(rec)
if f[F_STATE] ~= 'x' and f[F_STATE] ~= 'c' then return 'INVALID_STATE:' .. f[F_STATE] end
redis.call('ZREM', f[F_STATE] == 'x' and dead or completed, id)
batch_reopen(jobs, id, rec, f[F_STATE])
f[F_STATE] = 'w'
f[F_TOKEN] = ''
f[F_BASE] = f[F_ATTEMPTS]
f[F_FINISHED] = ''
-- A manual retry runs the job: an expiry it had (it may have died of it) no longer applies.
if f[F_EXPIRE] and f[F_EXPIRE] ~= '' then f[F_EXPIRE] = '' end
local nl2 = string.find(rec, '\n', nl + 1, true)
local body = nl2 and string.sub(rec, nl, nl2 - 1) or string.sub(rec, nl)
redis.call('HSET', jobs, id, table.concat(f, '|') .. body)
-- At the back of its priority, or the front for a lifo job (as at its add).
local front = f[F_LIFO] == '1'
if enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, front, record_group(rec), current_time(arg_now)) then
  redis.call('SPUBLISH', arg_wake_channel, 'w')
end
emit_event(events_key, arg_events_max_len, 'retried', { id })
return 'OK'
