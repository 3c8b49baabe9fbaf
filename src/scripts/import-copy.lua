#!lua
-- import-copy.lua: the first half of moving a BullMQ job when BullMQ's keys are on another server or
-- Cluster slot (importFromBullMQ, src/migrate/), where no script can reach both: writes the job here
-- as import-bullmq.lua would and notes it in `imported` (the source hash's fingerprint), before the
-- caller takes it out of BullMQ (bullmq-take.lua) and then clears the note, or, when BullMQ kept the
-- job (a BullMQ worker took it first), takes this copy back (import-undo.lua). A note left by a run cut
-- off between the two halves lets the next run recognise its own copy.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] annex         HASH annex: error lines, progress, logs, large payloads
-- KEYS[3] waiting       LIST
-- KEYS[4] prio          ZSET
-- KEYS[5] seq           STRING
-- KEYS[6] delayed       ZSET
-- KEYS[7] dead          ZSET
-- KEYS[8] ids           STRING
-- KEYS[9] events        STREAM lifecycle events
-- KEYS[10] meta         HASH queue settings: `partitions`, `moved`
-- KEYS[11] imported     HASH id -> fingerprint of a copy whose BullMQ original is not yet taken
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel   shard channel for idle workers
-- ARGV[3] eventsMaxLen  event stream cap (0 = no events)
-- ARGV[4] partitions    the caller's partition count (refused if the queue records another)
-- ARGV[5] fingerprint   SHA-1 of the BullMQ hash as read (includes/bullmq_take.lua)
-- ARGV[6] id            the job id (BullMQ's, kept)
-- ARGV[7] state         'w' waiting, 'd' delayed, 'x' dead
-- ARGV[8] created       epoch ms: BullMQ's timestamp
-- ARGV[9] due           epoch ms for a delayed job ('' = none)
-- ARGV[10] finished     epoch ms for a dead job ('' = none)
-- ARGV[11] optionTail   header fields 9.. in Lua numbering (see job-record.ts)
-- ARGV[12] data         JSON
-- ARGV[13] attempts     attempts BullMQ made, charged to the job's budget
-- ARGV[14] errors       annex error lines (`at|attempt|json`, '' = none)
-- ARGV[15] logs         annex log lines (JSON strings, '' = none)
-- ARGV[16] progress     progress JSON ('' = none)
-- ARGV[17] idFloor      BullMQ's id counter: generated ids here start above it ('' = leave the counter)
-- Events: `added`.
-- Returns: 'copied' (written now, or by an earlier run from the same BullMQ job), 'exists' (the id
--   belongs to another job here);
--   error `SURETY_PARTITIONS <n>` when this tag belongs to a queue of n partitions (nothing is written)
-- @include current_time
-- @include layout_refusal
-- @include write_imported
-- @include announce_delayed
-- @include emit_event

local refusal = layout_refusal(meta_key, arg_partitions)
if refusal then return refusal end
if redis.call('HEXISTS', jobs_key, arg_id) == 1 then
  return redis.call('HGET', imported_key, arg_id) == arg_fingerprint and 'copied' or 'exists'
end
local now = current_time(arg_now)
local k = { jobs = jobs_key, annex = annex_key, waiting = waiting_key, prio = prio_key, seq = seq_key,
  delayed = delayed_key, dead = dead_key, ids = ids_key }
local state, woken = write_imported(k, { id = arg_id, state = arg_state, created = arg_created, due = arg_due,
  finished = arg_finished, tail = arg_option_tail, data = arg_data, attempts = arg_attempts, errors = arg_errors,
  logs = arg_logs, progress = arg_progress, id_floor = arg_id_floor }, now)
redis.call('HSET', imported_key, arg_id, arg_fingerprint)
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
if state == 'd' then announce_delayed(delayed_key, arg_wake_channel, tonumber(arg_due)) end
emit_event(events_key, arg_events_max_len, 'added', { arg_id })
return 'copied'
