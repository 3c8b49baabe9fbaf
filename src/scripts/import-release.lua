#!lua flags=allow-oom
-- import-release.lua: the last step of a move across servers: once bullmq-take.lua has taken the job
-- out of BullMQ, the copy import-copy.lua held becomes visible here: waiting, delayed or dead, as its
-- record says (includes/place_imported.lua), and its note in `imported` goes. It only moves a job that
-- is already written, so it runs over maxmemory too.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] waiting       LIST
-- KEYS[3] prio          ZSET
-- KEYS[4] seq           STRING
-- KEYS[5] delayed       ZSET
-- KEYS[6] dead          ZSET
-- KEYS[7] events        STREAM lifecycle events
-- KEYS[8] imported      HASH id -> fingerprint of a held copy whose BullMQ original is not yet taken
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel   shard channel for idle workers
-- ARGV[3] eventsMaxLen  event stream cap (0 = no events)
-- ARGV[4] id            the job id
-- ARGV[5] fingerprint   the fingerprint import-copy.lua noted
-- Events: `added`.
-- Returns: 'released', or 'absent' (no such held copy: released or undone already; nothing changed)
-- @include current_time
-- @include place_imported
-- @include emit_event

if redis.call('HGET', imported_key, arg_id) ~= arg_fingerprint then return 'absent' end
redis.call('HDEL', imported_key, arg_id)
if redis.call('HEXISTS', jobs_key, arg_id) == 0 then return 'absent' end
if place_imported(queue_keys, arg_id, current_time(arg_now)) then redis.call('SPUBLISH', arg_wake_channel, 'w') end
emit_event(events_key, arg_events_max_len, 'added', { arg_id })
return 'released'
