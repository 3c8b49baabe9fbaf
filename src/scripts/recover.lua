#!lua flags=allow-oom
-- recover.lua: the nanny. Jobs whose lease deadline has passed (their worker crashed, stalled or lost its
-- connection) go back to the front of waiting, or to dead when their attempts are spent. Any worker
-- may run this; no PID bookkeeping is needed. It is the one place that decides whether a lost lease
-- costs an attempt, and it decides by the start mark alone:
-- - STARTED (the worker's start mark arrived: startedAt set): the attempt is charged (it was counted by
--   the mark) and recorded as a LeaseExpiredError; dead when the budget is spent.
-- - NOT STARTED (no start mark: prefetched and never run, a claim reply lost or read too late, a worker
--   killed within about one round trip of starting a processor): back free, with no error (a
--   `released` event, like release.lua), counted in F_REFUNDS, however many times. A processor that
--   kills its worker at once (before its mark leaves) is bounded by the worker instead: a job with
--   FREE_RETURNS (src/defaults.ts) refunds or more starts only once its mark is confirmed (the worker
--   waits for start.lua before calling the processor), so its next loss is a marked one. (Charging the
--   next unmarked loss instead spent the one attempt of jobs that never reached a processor: chaos
--   seed 4 under load.)
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- KEYS[3] active          ZSET
-- KEYS[4] waiting         LIST
-- KEYS[5] prio            ZSET
-- KEYS[6] seq             STRING
-- KEYS[7] dead            ZSET
-- KEYS[8] meta            HASH (field `starved`)
-- KEYS[9] events          STREAM lifecycle events
-- KEYS[10] delayed        ZSET
-- KEYS[11] deps           HASH blocked child -> `remaining parents|i or s`
-- KEYS[12] dependents     HASH parent -> its blocked children, newline-separated
-- KEYS[13] stats          HASH per-minute counters for queue.metrics()
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] limit           most jobs recovered per call
-- ARGV[3] defaultMaxAttempts
-- ARGV[4] keepCount       retention: dead jobs kept
-- ARGV[5] keepAgeMs       retention: dead jobs older than this are deleted
-- ARGV[6] wakeChannel     shard channel for idle workers
-- ARGV[7] doneChannel     shard channel for waitFor
-- ARGV[8] eventsMaxLen    event stream cap (0 = no events)
-- Returns: { requeued ids (table, free returns included), dead ids (table) }
-- @include current_time
-- @include chunked_call
-- @include chunked_hmget
-- @include parse_record
-- @include with_header
-- @include set_field
-- @include attempts_left
-- @include enqueue
-- @include record_group
-- @include group_leave
-- @include release_dedupe
-- @include annex_fields
-- @include trim_finished
-- @include drop_unkept
-- @include append_errors
-- @include wake_starved
-- @include emit_event
-- @include count_stats
-- @include settle_dependents
-- @include batch_settle

local jobs, annex, active, waiting, prio, seq, dead = jobs_key, annex_key, active_key, waiting_key, prio_key, seq_key, dead_key
local now = current_time(arg_now)
local scored = redis.call('ZRANGEBYSCORE', active, '-inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, tonumber(arg_limit))
if #scored == 0 then return { {}, {} } end
local expired = {}
for i = 1, #scored, 2 do expired[#expired + 1] = scored[i] end
chunked_call('ZREM', active, expired)

local recs = chunked_hmget(jobs, expired)
local requeued, dead_ids, dead_scores, updated, err_ids, lines = {}, {}, {}, {}, {}, {}
local lost_ids, unbegun = {}, {}
local dead_recs = {} -- the records (as they were) of dead_ids, for drop_unkept
local woken = false
for i = #expired, 1, -1 do
  -- Walk backwards so that LPUSH leaves the oldest expired job first in line.
  local id, rec = expired[i], recs[i]
  if rec then
    local f, nl = parse_record(rec)
    local free = f[F_STARTED] == ''
    local group = record_group(rec)
    if group then group_leave(group_keys(jobs), group, 1, now) end
    if free then
      set_field(f, F_REFUNDS, (tonumber(f[F_REFUNDS]) or 0) + 1)
    else
      err_ids[#err_ids + 1] = id
      lines[#lines + 1] = now .. '|' .. f[F_ATTEMPTS] .. '|{"name":"LeaseExpiredError","code":"ERR_LEASE_EXPIRED","message":"lease expired: the worker running attempt ' .. f[F_ATTEMPTS] .. ' stopped renewing it (crashed, stalled or disconnected)"}'
    end
    -- Revoke the lease: the old holder's token must never match again.
    f[F_TOKEN] = ''
    if free or attempts_left(f, tonumber(arg_default_max_attempts)) then
      f[F_STATE] = 'w'
      if enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, true, group, now) then woken = true end
      requeued[#requeued + 1] = id
      if free then unbegun[#unbegun + 1] = id else lost_ids[#lost_ids + 1] = id end
    else
      f[F_STATE] = 'x'
      f[F_FINISHED] = now
      dead_ids[#dead_ids + 1] = id
      dead_recs[#dead_ids] = rec
      release_dedupe(jobs, id, rec)
      batch_settle(jobs, id, rec, false, now)
      dead_scores[#dead_scores + 1] = now
      dead_scores[#dead_scores + 1] = id
    end
    updated[#updated + 1] = id
    updated[#updated + 1] = with_header(f, rec, nl)
  end
end
-- After the loop: group_leave may have found room for a group a claim went short on.
wake_starved(meta_key, arg_wake_channel)
chunked_call('HSET', jobs, updated)
append_errors(annex, err_ids, lines)
if #dead_ids > 0 then
  chunked_call('ZADD', dead, dead_scores)
  drop_unkept(dead, jobs, annex, dead_ids, dead_recs, 'x')
  trim_finished(dead, jobs, annex, now, tonumber(arg_keep_count), tonumber(arg_keep_age_ms), tonumber(arg_limit))
  redis.call('SPUBLISH', arg_done_channel, 'x\n' .. table.concat(dead_ids, '\n'))
end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
emit_event(events_key, arg_events_max_len, 'recovered', lost_ids)
emit_event(events_key, arg_events_max_len, 'released', unbegun)
-- A lost lease is a failed attempt.
count_stats(stats_key, now, 'f', #err_ids)
count_stats(stats_key, now, 'x', #dead_ids)
emit_event(events_key, arg_events_max_len, 'dead', dead_ids)
if #dead_ids > 0 then
  local k = queue_keys
  emit_event(events_key, arg_events_max_len, 'dead', (settle_dependents(k, now, {}, dead_ids)))
end
return { requeued, dead_ids }
