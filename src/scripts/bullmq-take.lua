#!lua flags=allow-oom
-- bullmq-take.lua: the second half of moving a BullMQ job to another server or Cluster slot
-- (import-copy.lua wrote the copy): takes the job out of BullMQ if it is still there as it was read
-- (includes/bullmq_take.lua). Only deletes, so it runs over maxmemory too.
-- KEYS[1] bullSource    LIST or ZSET the BullMQ structure the job was read in
-- KEYS[2] bullJob       HASH the BullMQ job (`<prefix>:<queue>:<id>`)
-- KEYS[3] bullLogs      LIST its BullMQ log (`...:<id>:logs`)
-- ARGV[1] kind          'list' or 'zset': the type of bullSource
-- ARGV[2] id            the job id
-- ARGV[3] fields        the BullMQ hash's field names as read, newline-separated
-- ARGV[4] fingerprint   SHA-1 of those fields' values as read
-- Returns: 'moved' (taken out of BullMQ), 'changed' or 'gone' (BullMQ kept it; nothing changed)
-- @include bullmq_take

return bullmq_take(bull_source_key, arg_kind, bull_job_key, bull_logs_key, arg_id, arg_fields, arg_fingerprint)
