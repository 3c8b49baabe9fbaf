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
-- Returns: { id, outcome, ... } per job; outcome is `waiting`, `delayed`, `dead`, `STALE:<state>:<attempts>` or `NOT_FOUND`
-- @include current_time
-- @include chunked_call
-- @include chunked_hmget
-- @include parse_record
-- @include with_header
-- @include attempts_left
-- @include enqueue
-- @include record_group
-- @include group_leave
-- @include release_dedupe
-- @include annex_fields
-- @include trim_finished
-- @include announce_delayed
-- @include append_errors
-- @include wake_starved
-- @include emit_event
-- @include count_stats
-- @include settle_dependents

local jobs, errors, active, delayed, waiting, prio, seq, dead =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now = current_time(ARGV[1])
local default_max = tonumber(ARGV[2])
local FIXED = 8
local n = (#ARGV - FIXED) / 4

local ids = {}
for i = 1, n do ids[i] = ARGV[FIXED + 1 + (i - 1) * 4] end
local recs = chunked_hmget(jobs, ids)

local out, accepted, lines, updated, dead_scores, dead_ids = {}, {}, {}, {}, {}, {}
local woken, min_due, retrying = false, nil, {}
for i = 1, n do
  local base = FIXED + 1 + (i - 1) * 4
  local id, rec = ids[i], recs[i]
  out[#out + 1] = id
  if not rec then
    out[#out + 1] = 'NOT_FOUND'
  else
    local f, nl = parse_record(rec)
    if f[F_STATE] == 'a' and f[F_TOKEN] == ARGV[base + 1] then
      accepted[#accepted + 1] = id
      local group = record_group(rec)
      lines[#lines + 1] = now .. '|' .. f[F_ATTEMPTS] .. '|' .. ARGV[base + 3]
      local delay = tonumber(ARGV[base + 2])
      if delay < 0 or not attempts_left(f, default_max) then
        f[F_STATE] = 'x'
        f[F_FINISHED] = now
        dead_scores[#dead_scores + 1] = now
        dead_scores[#dead_scores + 1] = id
        dead_ids[#dead_ids + 1] = id
        release_dedupe(jobs, id, rec)
        if group then group_leave(group_keys(jobs), group, 1, now) end
      elseif delay == 0 then
        retrying[#retrying + 1] = id
        f[F_STATE] = 'w'
        if group then group_leave(group_keys(jobs), group, 1, now) end
        -- A grouped retry goes first in its group (per-group FIFO across retries).
        if enqueue(waiting, prio, seq, id, tonumber(f[F_PRIORITY]) or 0, group ~= nil, group, now) then woken = true end
      else
        retrying[#retrying + 1] = id
        f[F_STATE] = 'd'
        f[F_RUN_AT] = now + delay
        if group then
          group_hold(group_keys(jobs), group, f[F_RUN_AT])
          group_leave(group_keys(jobs), group, 1, now)
        end
        redis.call('ZADD', delayed, f[F_RUN_AT], id)
        if min_due == nil or f[F_RUN_AT] < min_due then min_due = f[F_RUN_AT] end
      end
      out[#out + 1] = ({ x = 'dead', w = 'waiting', d = 'delayed' })[f[F_STATE]]
      updated[#updated + 1] = id
      updated[#updated + 1] = with_header(f, rec, nl)
    elseif f[F_TOKEN] == ARGV[base + 1] and f[F_STATE] ~= 'a' then
      -- The same failure re-sent after a lost reply: already applied (the token is kept until the
      -- job is claimed again, and cleared when its lease is revoked, so this cannot be a stale one).
      out[#out + 1] = ({ x = 'dead', w = 'waiting', d = 'delayed', c = 'completed' })[f[F_STATE]]
    else
      out[#out + 1] = 'STALE:' .. f[F_STATE] .. ':' .. f[F_ATTEMPTS]
    end
  end
end

if #accepted > 0 then
  chunked_call('ZREM', active, accepted)
  wake_starved(KEYS[9], ARGV[6])
  chunked_call('HSET', jobs, updated)
  append_errors(errors, accepted, lines)
end
if #dead_ids > 0 then
  chunked_call('ZADD', dead, dead_scores)
  trim_finished(dead, jobs, errors, now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
  redis.call('SPUBLISH', ARGV[7], 'x\n' .. table.concat(dead_ids, '\n'))
end
local max_len = tonumber(ARGV[8])
emit_event(KEYS[10], max_len, 'failed', accepted)
count_stats(KEYS[13], now, 'f', #accepted)
count_stats(KEYS[13], now, 'x', #dead_ids)
emit_event(KEYS[10], max_len, 'retrying', retrying)
emit_event(KEYS[10], max_len, 'dead', dead_ids)
if #dead_ids > 0 then
  local k = { jobs = jobs, errors = errors, waiting = waiting, prio = prio, seq = seq, delayed = delayed, dead = dead,
    deps = KEYS[11], dependents = KEYS[12], wake = ARGV[6], done = ARGV[7], stats = KEYS[13] }
  emit_event(KEYS[10], max_len, 'dead', settle_dependents(k, now, {}, dead_ids))
end
announce_delayed(delayed, ARGV[6], min_due)
if woken then redis.call('SPUBLISH', ARGV[6], 'w') end
return out
