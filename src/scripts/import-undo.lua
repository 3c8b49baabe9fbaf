#!lua flags=allow-oom
-- import-undo.lua: deletes a copy import-copy.lua held when BullMQ kept the original (a BullMQ worker
-- took it between the copy and the take), so the job runs once, in BullMQ. A held copy is in no list
-- or set here, so no worker can have started it.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] annex         HASH annex
-- KEYS[3] imported      HASH id -> fingerprint of a held copy whose BullMQ original is not yet taken
-- ARGV[1] id            the job id
-- ARGV[2] fingerprint   the fingerprint import-copy.lua noted
-- Returns: 'undone', or 'absent' (no such held copy: released or undone already; nothing changed)
-- @include annex_fields

if redis.call('HGET', imported_key, arg_id) ~= arg_fingerprint then return 'absent' end
redis.call('HDEL', imported_key, arg_id)
redis.call('HDEL', jobs_key, arg_id)
redis.call('HDEL', annex_key, unpack(annex_fields({ arg_id })))
return 'undone'
