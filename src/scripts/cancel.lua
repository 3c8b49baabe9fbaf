#!lua flags=allow-oom
-- cancel.lua: end a job that has not finished, at once, in the dead set with a CancelledError and no
-- retry (waiting|delayed|blocked|active -> dead). For an active job this also revokes its lease: the worker is
-- told on the wake channel (`x:<id>`) to abort it, and would in any case learn at its next lease
-- renewal; its late outcome is refused by the fence.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] delayed         ZSET
-- KEYS[6] active          ZSET
-- KEYS[7] dead            ZSET
-- KEYS[8] meta            HASH (field `starved`)
-- KEYS[9] events          STREAM lifecycle events
-- KEYS[10] seq            STRING
-- KEYS[11] deps           HASH blocked child -> `remaining parents|i or s`
-- KEYS[12] dependents     HASH parent -> its blocked children, newline-separated
-- KEYS[13] stats          HASH per-minute counters for queue.metrics()
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] id
-- ARGV[3] wakeChannel
-- ARGV[4] doneChannel
-- ARGV[5] eventsMaxLen    event stream cap (0 = no events)
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:<state letter>' (completed or already dead)
-- Jobs that depend on it fail with a DependencyFailedError (unless they ignore dependency failures).
-- A cancelled blocked job is taken off its parents' lists of dependents: they no longer settle it.
-- A group held behind a cancelled delayed job (concurrency 1, includes/group_hold.lua) is woken.
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include append_errors
-- @include wake_starved
-- @include emit_event
-- @include enqueue
-- @include count_stats
-- @include settle_dependents
-- @include unlink
-- @include unlink_parents
-- @include release_dedupe
-- @include record_started
-- @include batch_settle
-- @include group_hold

local jobs, annex, waiting, prio, delayed, active, dead = jobs_key, annex_key, waiting_key, prio_key, delayed_key, active_key, dead_key
local id = arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local f, nl = parse_record(rec)
local state = f[F_STATE]
if state == 'c' or state == 'x' then return 'INVALID_STATE:' .. state end
local k = queue_keys
local now = current_time(arg_now)
unlink(k, id, state, rec, now)
if state == 'b' then unlink_parents(k, id) end
if state == 'a' then wake_starved(meta_key, arg_wake_channel) end
local group = state == 'd' and record_group(rec)
if group and group_unhold(group_keys(jobs), group, id, now) then redis.call('SPUBLISH', arg_wake_channel, 'w') end
release_dedupe(jobs, id, rec, state ~= 'a' and not record_started(rec))
batch_settle(jobs, id, rec, false, now)
f[F_STATE] = 'x'
f[F_TOKEN] = ''
f[F_FINISHED] = now
redis.call('HSET', jobs, id, with_header(f, rec, nl))
append_errors(annex, { id }, { now .. '|' .. f[F_ATTEMPTS] .. '|{"name":"CancelledError","code":"ERR_CANCELLED","message":"job ' .. id:gsub('[\\"]', '\\%0') .. ' was cancelled"}' })
redis.call('ZADD', dead, now, id)
if state == 'a' then redis.call('SPUBLISH', arg_wake_channel, 'x:' .. id) end
redis.call('SPUBLISH', arg_done_channel, 'x\n' .. id)
emit_event(events_key, arg_events_max_len, 'cancelled', { id })
count_stats(stats_key, now, 'x', 1)
emit_event(events_key, arg_events_max_len, 'dead', (settle_dependents(k, now, {}, { id })))
return 'OK'
