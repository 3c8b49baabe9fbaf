#!lua flags=allow-oom
-- fail.lua: record failed attempts, many per call. Each accepted failure appends its error line, then
-- the job goes back to waiting (retryDelayMs 0), to delayed (retryDelayMs > 0, due at now + delay), or
-- to dead when its attempts are spent or retryDelayMs is -1 (UnrecoverableError). Fenced like complete.lua.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- KEYS[3] active          ZSET
-- KEYS[4] delayed         ZSET
-- KEYS[5] waiting         LIST
-- KEYS[6] prio            ZSET
-- KEYS[7] seq             STRING
-- KEYS[8] dead            ZSET
-- KEYS[9] meta            HASH (field `starved`)
-- KEYS[10] events         STREAM lifecycle events
-- KEYS[11] deps           HASH blocked child -> `remaining parents|i or s`
-- KEYS[12] dependents     HASH parent -> its blocked children, newline-separated
-- KEYS[13] stats          HASH per-minute counters for queue.metrics()
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] defaultMaxAttempts
-- ARGV[3] keepCount       retention: dead jobs kept
-- ARGV[4] keepAgeMs       retention: dead jobs older than this are deleted
-- ARGV[5] limit           most jobs trimmed per call
-- ARGV[6] wakeChannel     shard channel for idle workers
-- ARGV[7] doneChannel     shard channel for waitFor
-- ARGV[8] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[9..] repeated: id, token, retryDelayMs, error
--   token (fencing token from claim), retryDelayMs (>= 0, or -1 for no retry), error (JSON: name, message, stack, code)
--   error `S` instead of JSON: the processor SNOOZED the job (SnoozeError, job.sleep): the attempt's
--     budget is given back (base + 1: not charged against maxAttempts; attempts, the starts, are never
--     given back), no error line, not counted as failed, snoozes + 1, delayed by retryDelayMs
--   error `R`: the processor hit a RATE LIMIT (RateLimitError): the budget is given back, snoozes + 1
--     (the Worker's maxSnoozes bounds both kinds), the job goes to the front of waiting, and claims
--     stop for retryDelayMs: the job's group is parked that long when it has one, else the queue
--     (meta `limited` = until, read by claim.lua)
-- A failure implies its start: a job failed before its start mark arrived counts the attempt here.
-- Returns: { id, outcome, ... } per job; outcome is `waiting`, `delayed`, `dead`, `snoozed`,
--   `limited`, `STALE:<state>:<attempts>` or `NOT_FOUND`; then { '', 'XNOTIFY' } when the call queued
--   notifications for children in other queues (see complete.lua)
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
-- @include int_text
-- @include release_dedupe
-- @include annex_fields
-- @include trim_finished
-- @include drop_unkept
-- @include announce_delayed
-- @include append_errors
-- @include wake_starved
-- @include emit_event
-- @include count_stats
-- @include settle_dependents
-- @include batch_settle

local jobs, annex, active, delayed, waiting, prio, seq, dead =
  jobs_key, annex_key, active_key, delayed_key, waiting_key, prio_key, seq_key, dead_key
local now = current_time(arg_now)
local default_max = tonumber(arg_default_max_attempts)
local FIXED = 8
local n = (#ARGV - FIXED) / 4

local ids = {}
for i = 1, n do ids[i] = ARGV[FIXED + 1 + (i - 1) * 4] end
local recs = chunked_hmget(jobs, ids)

local out, accepted, lines, updated, dead_scores, dead_ids = {}, {}, {}, {}, {}, {}
local woken, min_due, retrying, snoozed, limited = false, nil, {}, {}, {}
local given_back = {} -- snoozed and rate-limited: out of active, no error line
local dead_recs = {} -- the records (as they were) of dead_ids, for drop_unkept

-- Job `id` (header fields `f`; `group` or nil) waits until `due`: delayed (a retry after backoff, or a
-- snooze). Under concurrency 1 its group keeps the job's place (group_hold) before the job's slot is
-- freed (group_leave), so the group is not put back in the rotation in between. A note of a wait it
-- was once parked in (wait-signal.lua; left when it was woken otherwise, e.g. by promote) goes: were
-- this delay to end at that wait's deadline, signal.lua would take the job for parked and wake it.
local function delay_job(f, id, group, due)
  f[F_STATE] = 'd'
  f[F_RUN_AT] = due
  redis.call('HDEL', annex, id .. '\1w')
  if group then
    group_hold(group_keys(jobs), group, due, id)
    group_leave(group_keys(jobs), group, 1, now)
  end
  redis.call('ZADD', delayed, due, id)
  if min_due == nil or due < min_due then min_due = due end
end
for i = 1, n do
  local base = FIXED + 1 + (i - 1) * 4
  local id, rec = ids[i], recs[i]
  out[#out + 1] = id
  if not rec then
    out[#out + 1] = 'NOT_FOUND'
  else
    local f, nl = parse_record(rec)
    local kind = ARGV[base + 3]
    local held = f[F_STATE] == 'a' and f[F_TOKEN] == ARGV[base + 1]
    if held and f[F_STARTED] == '' then
      -- Failed before its start mark arrived: the failure counts the start.
      f[F_ATTEMPTS] = (tonumber(f[F_ATTEMPTS]) or 0) + 1
      f[F_STARTED] = int_text(now)
    end
    if held and (kind == 'S' or kind == 'R') then
      -- Snoozed or rate-limited: the attempt did not fail; its budget is given back (it still started).
      given_back[#given_back + 1] = id
      f[F_BASE] = (tonumber(f[F_BASE]) or 0) + 1
      local group = record_group(rec)
      local delay = math.max(0, tonumber(ARGV[base + 2]) or 0)
      if kind == 'S' then
        snoozed[#snoozed + 1] = id
        set_field(f, F_SNOOZES, (tonumber(f[F_SNOOZES]) or 0) + 1)
        delay_job(f, id, group, now + delay)
        out[#out + 1] = 'snoozed'
      else
        limited[#limited + 1] = id
        set_field(f, F_SNOOZES, (tonumber(f[F_SNOOZES]) or 0) + 1)
        f[F_STATE] = 'w'
        if group then
          -- Parked before its slot is freed, so group_leave does not put it back in the rotation.
          local gk = group_keys(jobs)
          group_pause(gk, group, now + delay, '')
          group_leave(gk, group, 1, now)
        else
          local until_ms = tonumber(redis.call('HGET', meta_key, 'limited') or '0')
          if now + delay > until_ms then redis.call('HSET', meta_key, 'limited', now + delay) end
        end
        -- Back first in line: it was claimed first and must not lose its turn to the pause.
        if enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, true, group, now) then woken = true end
        out[#out + 1] = 'limited'
      end
      updated[#updated + 1] = id
      updated[#updated + 1] = with_header(f, rec, nl)
    elseif held then
      accepted[#accepted + 1] = id
      local group = record_group(rec)
      lines[#lines + 1] = int_text(now) .. '|' .. f[F_ATTEMPTS] .. '|' .. ARGV[base + 3]
      local delay = tonumber(ARGV[base + 2])
      if delay < 0 or not attempts_left(f, default_max) then
        f[F_STATE] = 'x'
        f[F_FINISHED] = now
        dead_scores[#dead_scores + 1] = int_text(now)
        dead_scores[#dead_scores + 1] = id
        dead_ids[#dead_ids + 1] = id
        dead_recs[#dead_ids] = rec
        release_dedupe(jobs, id, rec)
        batch_settle(jobs, id, rec, false, now)
        if group then group_leave(group_keys(jobs), group, 1, now) end
      elseif delay == 0 then
        retrying[#retrying + 1] = id
        f[F_STATE] = 'w'
        if group then group_leave(group_keys(jobs), group, 1, now) end
        -- A grouped retry goes first in its group (per-group FIFO across retries); a lifo job first in
        -- its priority, as at its add.
        local front = group ~= nil or f[F_LIFO] == '1'
        if enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, front, group, now) then woken = true end
      else
        retrying[#retrying + 1] = id
        delay_job(f, id, group, now + delay)
      end
      out[#out + 1] = ({ x = 'dead', w = 'waiting', d = 'delayed' })[f[F_STATE]]
      updated[#updated + 1] = id
      updated[#updated + 1] = with_header(f, rec, nl)
    elseif f[F_TOKEN] == ARGV[base + 1] and f[F_STATE] ~= 'a' then
      -- The same failure re-sent after a lost reply: already applied (the token is kept until the
      -- job is claimed again, and cleared when its lease is revoked, so this cannot be a stale one).
      if kind == 'S' then out[#out + 1] = 'snoozed'
      elseif kind == 'R' then out[#out + 1] = 'limited'
      else out[#out + 1] = ({ x = 'dead', w = 'waiting', d = 'delayed', c = 'completed' })[f[F_STATE]] end
    else
      out[#out + 1] = 'STALE:' .. f[F_STATE] .. ':' .. f[F_ATTEMPTS]
    end
  end
end

if #accepted > 0 or #given_back > 0 then
  chunked_call('ZREM', active, accepted)
  chunked_call('ZREM', active, given_back)
  wake_starved(meta_key, arg_wake_channel)
  chunked_call('HSET', jobs, updated)
  append_errors(annex, accepted, lines)
end
if #dead_ids > 0 then
  chunked_call('ZADD', dead, dead_scores)
  drop_unkept(dead, jobs, annex, dead_ids, dead_recs, 'x')
  trim_finished(dead, jobs, annex, now, tonumber(arg_keep_count), tonumber(arg_keep_age_ms), tonumber(arg_limit))
  redis.call('SPUBLISH', arg_done_channel, 'x\n' .. table.concat(dead_ids, '\n'))
end
local max_len = arg_events_max_len
emit_event(events_key, max_len, 'failed', accepted)
count_stats(stats_key, now, 'f', #accepted)
count_stats(stats_key, now, 'x', #dead_ids)
emit_event(events_key, max_len, 'retrying', retrying)
emit_event(events_key, max_len, 'snoozed', snoozed)
emit_event(events_key, max_len, 'rateLimited', limited)
emit_event(events_key, max_len, 'dead', dead_ids)
if #dead_ids > 0 then
  local k = queue_keys
  local failed, queued = settle_dependents(k, now, {}, dead_ids)
  emit_event(events_key, max_len, 'dead', failed)
  if queued > 0 then
    out[#out + 1] = ''
    out[#out + 1] = 'XNOTIFY'
  end
end
announce_delayed(delayed, arg_wake_channel, min_due)
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
return out
