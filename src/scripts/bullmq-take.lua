#!lua flags=allow-oom
-- bullmq-take.lua: the second step of moving a BullMQ job to another server or Cluster slot
-- (import-copy.lua holds the copy): takes the job out of BullMQ if it is still there as it was read
-- (includes/bullmq_take.lua), and leaves a receipt: `bullTaken` holds the fingerprint for a week, so a
-- run cut off before it released the copy (import-release.lua) knows the take happened. Only deletes
-- but for the receipt, so it runs over maxmemory too.
-- KEYS[1] bullSource    LIST or ZSET the BullMQ structure the job was read in
-- KEYS[2] bullJob       HASH the BullMQ job (`<prefix>:<queue>:<id>`)
-- KEYS[3] bullLogs      LIST its BullMQ log (`...:<id>:logs`)
-- KEYS[4] bullTaken     STRING the receipt (`...:<id>:surety-taken`)
-- ARGV[1] kind          'list' or 'zset': the type of bullSource
-- ARGV[2] id            the job id
-- ARGV[3] fields        the BullMQ hash's field names as read, newline-separated
-- ARGV[4] fingerprint   SHA-1 of those fields' values as read
-- Returns: 'moved' (taken out of BullMQ), 'changed' or 'gone' (BullMQ kept it; nothing changed)
-- @include bullmq_take

local taken = bullmq_take(bull_source_key, arg_kind, bull_job_key, bull_logs_key, arg_id, arg_fields, arg_fingerprint)
if taken == 'moved' then redis.call('SET', bull_taken_key, arg_fingerprint, 'EX', 604800) end
return taken
