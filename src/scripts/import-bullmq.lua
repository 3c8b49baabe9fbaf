#!lua
-- import-bullmq.lua: moves one job of a BullMQ queue on this server into this queue, in one step, so it
-- is never in both systems nor in neither (importFromBullMQ, src/migrate/): BullMQ's waiting,
-- prioritized, legacy paused and delayed jobs -> waiting or delayed here (-> waiting if already due),
-- its failed jobs -> dead. The job keeps its id, name, data, priority, due time, creation time,
-- attempts made and the options that map (the caller encodes them as an option tail). Nothing is
-- written when the id is taken here, when BullMQ changed the job since the caller read it, or when it
-- left the BullMQ state the caller read it in (a BullMQ worker took it: it finishes there).
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
-- KEYS[11] bullSource   LIST or ZSET the BullMQ structure the job was read in
-- KEYS[12] bullJob      HASH the BullMQ job (`<prefix>:<queue>:<id>`)
-- KEYS[13] bullLogs     LIST its BullMQ log (`...:<id>:logs`)
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel   shard channel for idle workers
-- ARGV[3] eventsMaxLen  event stream cap (0 = no events)
-- ARGV[4] partitions    the caller's partition count (refused if the queue records another)
-- ARGV[5] kind          'list' or 'zset': the type of bullSource
-- ARGV[6] fields        the BullMQ hash's field names as read, newline-separated
-- ARGV[7] fingerprint   SHA-1 of those fields' values as read (includes/bullmq_take.lua)
-- ARGV[8] id            the job id (BullMQ's, kept)
-- ARGV[9] state         'w' waiting, 'd' delayed, 'x' dead
-- ARGV[10] created      epoch ms: BullMQ's timestamp
-- ARGV[11] due          epoch ms for a delayed job ('' = none)
-- ARGV[12] finished     epoch ms for a dead job ('' = none)
-- ARGV[13] optionTail   header fields 9.. in Lua numbering (see job-record.ts)
-- ARGV[14] data         JSON
-- ARGV[15] attempts     attempts BullMQ made, charged to the job's budget
-- ARGV[16] errors       annex error lines (`at|attempt|json`, '' = none)
-- ARGV[17] logs         annex log lines (JSON strings, '' = none)
-- ARGV[18] progress     progress JSON ('' = none)
-- ARGV[19] idFloor      BullMQ's id counter: generated ids here start above it ('' = leave the counter)
-- Events: `added`.
-- Returns: 'moved', 'exists' (the id is taken here), 'changed' or 'gone' (left in BullMQ);
--   error `SURETY_PARTITIONS <n>` when this tag belongs to a queue of n partitions (nothing is written)
-- @include current_time
-- @include layout_refusal
-- @include bullmq_take
-- @include write_imported
-- @include place_imported
-- @include emit_event

local refusal = layout_refusal(meta_key, arg_partitions)
if refusal then return refusal end
if redis.call('HEXISTS', jobs_key, arg_id) == 1 then return 'exists' end
local taken = bullmq_take(bull_source_key, arg_kind, bull_job_key, bull_logs_key, arg_id, arg_fields, arg_fingerprint)
if taken ~= 'moved' then return taken end
local now = current_time(arg_now)
write_imported(queue_keys, { id = arg_id, state = arg_state, created = arg_created, due = arg_due,
  finished = arg_finished, tail = arg_option_tail, data = arg_data, attempts = arg_attempts, errors = arg_errors,
  logs = arg_logs, progress = arg_progress, id_floor = arg_id_floor }, now)
if place_imported(queue_keys, arg_id, now) then redis.call('SPUBLISH', arg_wake_channel, 'w') end
emit_event(events_key, arg_events_max_len, 'added', { arg_id })
return 'moved'
