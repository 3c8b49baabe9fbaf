#!lua
-- import-copy.lua: the first of the three steps of moving a BullMQ job when BullMQ's keys are on
-- another server or Cluster slot (importFromBullMQ, src/migrate/), where no script can reach both:
-- writes the job's record here, held where no worker sees it (in no list or set), and notes it in
-- `imported` (the source hash's fingerprint). The caller then takes the job out of BullMQ
-- (bullmq-take.lua) and releases the copy (import-release.lua), or, when BullMQ kept the job (a BullMQ
-- worker took it first), deletes the copy (import-undo.lua). So the job runs in one system only. A
-- note left by a run cut off between the steps lets the next run finish them (src/migrate/import.ts).
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] annex         HASH annex: error lines, progress, logs, large payloads
-- KEYS[3] ids           STRING
-- KEYS[4] meta          HASH queue settings: `partitions`, `moved`
-- KEYS[5] imported      HASH id -> fingerprint of a held copy whose BullMQ original is not yet taken
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] partitions    the caller's partition count (refused if the queue records another)
-- ARGV[3] fingerprint   SHA-1 of the BullMQ hash as read (includes/bullmq_take.lua)
-- ARGV[4] id            the job id (BullMQ's, kept)
-- ARGV[5] state         'w' waiting, 'd' delayed, 'x' dead
-- ARGV[6] created       epoch ms: BullMQ's timestamp
-- ARGV[7] due           epoch ms for a delayed job ('' = none)
-- ARGV[8] finished      epoch ms for a dead job ('' = none)
-- ARGV[9] optionTail    header fields 9.. in Lua numbering (see job-record.ts)
-- ARGV[10] data         JSON
-- ARGV[11] attempts     attempts BullMQ made, charged to the job's budget
-- ARGV[12] errors       annex error lines (`at|attempt|json`, '' = none)
-- ARGV[13] logs         annex log lines (JSON strings, '' = none)
-- ARGV[14] progress     progress JSON ('' = none)
-- ARGV[15] idFloor      BullMQ's id counter: generated ids here start above it ('' = leave the counter)
-- Returns: 'copied' (held now, or by an earlier run from the same BullMQ job), 'exists' (the id
--   belongs to another job here);
--   error `SURETY_PARTITIONS <n>` when this tag belongs to a queue of n partitions (nothing is written)
-- @include current_time
-- @include layout_refusal
-- @include write_imported

local refusal = layout_refusal(meta_key, arg_partitions)
if refusal then return refusal end
if redis.call('HEXISTS', jobs_key, arg_id) == 1 then
  return redis.call('HGET', imported_key, arg_id) == arg_fingerprint and 'copied' or 'exists'
end
write_imported(queue_keys, { id = arg_id, state = arg_state, created = arg_created, due = arg_due,
  finished = arg_finished, tail = arg_option_tail, data = arg_data, attempts = arg_attempts, errors = arg_errors,
  logs = arg_logs, progress = arg_progress, id_floor = arg_id_floor }, current_time(arg_now))
redis.call('HSET', imported_key, arg_id, arg_fingerprint)
return 'copied'
