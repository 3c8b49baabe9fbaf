#!lua flags=allow-oom
-- complete.lua: record the outcome of finished attempts (active -> completed), many per call. An
-- outcome is accepted only with the attempt's fencing token while the job is still active; a token the
-- job has moved past (its lease expired and it was recovered) is refused, so the newer attempt stands.
-- Re-sending an accepted completion (a reply lost to a dropped connection) is a no-op.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- KEYS[3] active          ZSET
-- KEYS[4] completed       ZSET
-- KEYS[5] meta            HASH (field `starved`)
-- KEYS[6] events          STREAM lifecycle events
-- KEYS[7] waiting         LIST
-- KEYS[8] prio            ZSET
-- KEYS[9] seq             STRING
-- KEYS[10] delayed        ZSET
-- KEYS[11] dead           ZSET
-- KEYS[12] deps           HASH blocked child -> `remaining parents|i or s`
-- KEYS[13] dependents     HASH parent -> its blocked children, newline-separated
-- KEYS[14] stats          HASH per-minute counters for queue.metrics()
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] keepCount       retention: completed jobs kept (0 = delete at once)
-- ARGV[3] keepAgeMs       retention: completed jobs older than this are deleted
-- ARGV[4] limit           most jobs trimmed per call
-- ARGV[5] doneChannel     shard channel for waitFor
-- ARGV[6] wakeChannel     shard channel for idle workers
-- ARGV[7] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[8] starts          start marks that ride on this call: `id \n token \n id \n token ...` ('' = none),
--                         applied first (includes/mark_starts.lua), so a worker at concurrency 1 sends a
--                         job's completion and the next job's start in one call
-- ARGV[9..] repeated: id, token, result
--   token (fencing token from claim), result (JSON, '' = undefined)
-- A completion implies its start: a job completed before its start mark arrived counts the attempt here.
-- The `completed` event entry carries the results (`results`, one line per id; '' = undefined) when
-- any job of the call returned one.
-- Returns: { id, reason, ... } for each refused outcome; reason is `STALE:<state>:<attempts>` or
--   `NOT_FOUND`; then { id, 'START_LOST' } for each start mark whose lease the worker no longer holds;
--   then { '', 'XNOTIFY' } when the call queued notifications for children in other queues (the
--   `xnotify` outbox, see includes/settle_dependents.lua): the caller forwards them
-- @include current_time
-- @include chunked_call
-- @include chunked_hmget
-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include group_leave
-- @include release_dedupe
-- @include append_errors
-- @include count_stats
-- @include settle_dependents
-- @include batch_settle
-- @include annex_fields
-- @include trim_finished
-- @include drop_unkept
-- @include wake_starved
-- @include emit_event
-- @include int_text
-- @include mark_starts

-- (state)|(token)|(attempts)(|base|createdAt|runAt|)(startedAt)|finishedAt(|()priority|...)
local COMPLETE_PATTERN = '^(.)|([^|]*)|([^|]*)(|[^|]*|[^|]*|[^|]*|)([^|]*)|[^|]*(|().*)$'

local jobs, annex, active, completed = jobs_key, annex_key, active_key, completed_key
local now = current_time(arg_now)
local keep_count = tonumber(arg_keep_count)
local FIXED = 8
local n = (#ARGV - FIXED) / 3
-- Formatting a number in Lua is a sprintf (~0.3 us): do it once per call, not per job.
local now_s = int_text(now)
local lost_starts = {}
if arg_starts ~= '' then
  local mark_ids, mark_tokens = parse_marks(arg_starts)
  lost_starts = mark_starts(jobs, mark_ids, mark_tokens, now_s)
end

local ids = {}
for i = 1, n do ids[i] = ARGV[FIXED + 1 + (i - 1) * 3] end
local recs = chunked_hmget(jobs, ids)

local refused, done, updated, scores = {}, {}, {}, {}
local notified = false
local left_groups, finished_recs = {}, {}
-- The `completed` event carries each job's result (one line per id: JSON has no raw newline), only
-- when events are on and some job returned a value.
local with_events = (tonumber(arg_events_max_len) or 0) > 0
local results, any_result = {}, false
-- Every completed job's result, for the parents of job.addChildren's children (settle_dependents).
local done_results = {}
for i = 1, n do
  local base = FIXED + 1 + (i - 1) * 3
  local rec = recs[i]
  if not rec then
    refused[#refused + 1] = ids[i]
    refused[#refused + 1] = 'NOT_FOUND'
  else
    -- Only state, token, attempts and finishedAt matter here: one pattern match reads them and cuts
    -- the record around finishedAt (the hot path: no header split).
    local state, token, attempts, mid, started, rest, late = string.match(rec, COMPLETE_PATTERN)
    if state == 'a' and token == ARGV[base + 1] then
      if started == '' then
        -- Completed before its start mark arrived: the completion counts the start.
        attempts = int_text((tonumber(attempts) or 0) + 1)
        started = now_s
      end
      -- Where field 8 starts: a short header (no group, dedupe, batch, keep) is known cheaply.
      note_header_end(rec, late, 8)
      done[#done + 1] = ids[i]
      finished_recs[#done] = rec
      done_results[#done] = ARGV[base + 2]
      if with_events and (any_result or ARGV[base + 2] ~= '') then
        if not any_result then
          -- The first result: the jobs before it returned undefined.
          any_result = true
          for j = 1, #done - 1 do results[j] = '' end
        end
        results[#done] = ARGV[base + 2]
      end
      local group = record_group(rec)
      if group then left_groups[group] = (left_groups[group] or 0) + 1 end
      updated[#updated + 1] = ids[i]
      updated[#updated + 1] = 'c|' .. token .. '|' .. attempts .. mid .. started .. '|' .. now_s .. rest .. '\n' .. ARGV[base + 2]
      scores[#scores + 1] = now_s
      scores[#scores + 1] = ids[i]
    elseif not (state == 'c' and token == ARGV[base + 1]) then
      refused[#refused + 1] = ids[i]
      refused[#refused + 1] = 'STALE:' .. state .. ':' .. attempts
    end
  end
end

if #done > 0 then
  chunked_call('ZREM', active, done)
  for group, count in pairs(left_groups) do group_leave(group_keys(jobs), group, count, now) end
  for j = 1, #done do release_dedupe(jobs, done[j], finished_recs[j]) end
  if keep_count == 0 then
    chunked_call('HDEL', jobs, done)
    chunked_call('HDEL', annex, annex_fields(done))
  else
    chunked_call('HSET', jobs, updated)
    chunked_call('ZADD', completed, scores)
    drop_unkept(completed, jobs, annex, done, finished_recs, 'c')
    trim_finished(completed, jobs, annex, now, keep_count, tonumber(arg_keep_age_ms), tonumber(arg_limit))
  end
  redis.call('SPUBLISH', arg_done_channel, 'c\n' .. table.concat(done, '\n'))
  wake_starved(meta_key, arg_wake_channel)
  emit_event(events_key, arg_events_max_len, 'completed', done, any_result and table.concat(results, '\n') or nil, 'results')
  local k = queue_keys
  count_stats(stats_key, now, 'c', #done)
  for j = 1, #done do batch_settle(jobs, done[j], finished_recs[j], true, now) end
  local failed, queued = settle_dependents(k, now, done, {}, done_results)
  emit_event(events_key, arg_events_max_len, 'dead', failed)
  notified = queued > 0
end
for j = 1, #lost_starts do
  refused[#refused + 1] = lost_starts[j]
  refused[#refused + 1] = 'START_LOST'
end
if notified then
  refused[#refused + 1] = ''
  refused[#refused + 1] = 'XNOTIFY'
end
return refused
