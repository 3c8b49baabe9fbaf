#!lua flags=allow-oom
-- remove.lua: delete a job that is not active, with its record and error lines. An active job is
-- refused: its worker holds a lease on it (wait for it to finish, then remove it).
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] delayed         ZSET
-- KEYS[6] completed       ZSET
-- KEYS[7] dead            ZSET
-- KEYS[8] events          STREAM lifecycle events
-- KEYS[9] seq             STRING
-- KEYS[10] deps           HASH blocked child -> `remaining parents|i or s`
-- KEYS[11] dependents     HASH parent -> its blocked children, newline-separated
-- KEYS[12] stats          HASH per-minute counters for queue.metrics()
-- ARGV[1] id
-- ARGV[2] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[3] wakeChannel
-- ARGV[4] doneChannel
-- ARGV[5] now             epoch ms, '' = Redis TIME
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:a'
-- Jobs blocked on a removed job that had not completed fail with a DependencyFailedError. A removed job
-- that had parents is taken off their lists of dependents (a job added later under its id is not theirs).
-- A group held behind a removed delayed job (concurrency 1, includes/group_hold.lua) is woken.
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include append_errors
-- @include count_stats
-- @include settle_dependents
-- @include unlink
-- @include unlink_parents
-- @include release_dedupe
-- @include record_started
-- @include annex_fields
-- @include emit_event
-- @include batch_settle
-- @include group_hold

local jobs, annex, waiting, prio, delayed, completed, dead = jobs_key, annex_key, waiting_key, prio_key, delayed_key, completed_key, dead_key
local id = arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local state = string.sub(rec, 1, 1)
if state == 'a' then return 'INVALID_STATE:a' end
local k = queue_keys
local now = current_time(arg_now)
unlink(k, id, state, rec, now)
unlink_parents(k, id)
local group = state == 'd' and record_group(rec)
if group and group_unhold(group_keys(jobs), group, id, now) then redis.call('SPUBLISH', arg_wake_channel, 'w') end
release_dedupe(jobs, id, rec, state ~= 'c' and state ~= 'x' and not record_started(rec))
-- An unfinished batch member removed counts as dead in its batch.
if state ~= 'c' and state ~= 'x' then batch_settle(jobs, id, rec, false, now) end
redis.call('HDEL', jobs, id)
redis.call('HDEL', annex, unpack(annex_fields({ id })))
emit_event(events_key, arg_events_max_len, 'removed', { id })
if state ~= 'c' then
  emit_event(events_key, arg_events_max_len, 'dead', (settle_dependents(k, now, {}, { id })))
end
return 'OK'
