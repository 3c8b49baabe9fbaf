#!lua flags=allow-oom
-- import-undo.lua: takes back a copy import-copy.lua wrote when BullMQ kept the original (a BullMQ
-- worker took it between the two halves), so the job runs once, there: the copy is deleted unless a
-- processor has started it here (its attempts grew past those it was imported with, a start is
-- recorded, or it is active or finished).
-- A copy that did start here is left to finish, and reported: that job ran in both systems. Its note
-- then becomes the mark `ran-in-both`, which the run deletes once its report names the job, so a run
-- killed before it reports leaves the job to the next run's report.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] annex         HASH annex
-- KEYS[3] waiting       LIST
-- KEYS[4] prio          ZSET
-- KEYS[5] delayed       ZSET
-- KEYS[6] dead          ZSET
-- KEYS[7] imported      HASH id -> fingerprint of a copy whose BullMQ original is not yet taken, or
--                       `ran-in-both`
-- ARGV[1] id            the job id
-- ARGV[2] fingerprint   the fingerprint import-copy.lua noted
-- ARGV[3] attempts      the attempts it was imported with
-- Returns: 'undone', 'started' (left running here, its note now `ran-in-both`), or 'absent' (no note of
--   this copy, or no copy: the note, if any, is deleted)
-- @include parse_record
-- @include annex_fields

if redis.call('HGET', imported_key, arg_id) ~= arg_fingerprint then return 'absent' end
local rec = redis.call('HGET', jobs_key, arg_id)
if not rec then
  redis.call('HDEL', imported_key, arg_id)
  return 'absent'
end
local f = parse_record(rec)
if tonumber(f[F_ATTEMPTS]) ~= tonumber(arg_attempts) or f[F_STARTED] ~= ''
  or (f[F_STATE] ~= 'w' and f[F_STATE] ~= 'd' and f[F_STATE] ~= 'x') then
  redis.call('HSET', imported_key, arg_id, 'ran-in-both')
  return 'started'
end
redis.call('HDEL', imported_key, arg_id)
redis.call('LREM', waiting_key, 1, arg_id)
redis.call('ZREM', prio_key, arg_id)
redis.call('ZREM', delayed_key, arg_id)
redis.call('ZREM', dead_key, arg_id)
redis.call('HDEL', jobs_key, arg_id)
redis.call('HDEL', annex_key, unpack(annex_fields({ arg_id })))
return 'undone'
