#!lua flags=allow-oom
-- drain.lua: delete up to `limit` jobs that have not started (queue.drain): blocked ones first (only
-- when asked), then delayed (unless asked to keep them), then waiting ones (the waiting list, the prio
-- zset, each group's list). Kept delayed jobs stay delayed even when due (nothing is promoted here).
-- Active jobs keep running; completed and dead ones stay. Each deleted job is cleaned up as remove.lua
-- does: its record and annex fields, its dedupe key (if it still holds it), its batch count (an
-- unfinished member counts as dead), its group's bookkeeping (backlog, waiting count, rotation), and
-- its links: a blocked job leaves its parents' lists; jobs blocked on a deleted waiting or delayed job
-- end dead with a DependencyFailedError (or run, if they ignore dependency failures), as after
-- remove(id), so no child waits for a parent that is gone. Blocked jobs deleted here take their own
-- blocked children with them in later calls (every child of a blocked job is blocked), so those are
-- not failed. A group held behind a deleted delayed job (concurrency 1, includes/group_hold.lua) is
-- woken. Called repeatedly by the client until nothing is left.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs, parents, payloads, steps
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] delayed         ZSET
-- KEYS[7] dead            ZSET
-- KEYS[8] deps            HASH blocked child -> `remaining parents|i or s`
-- KEYS[9] dependents      HASH parent -> its blocked children, newline-separated
-- KEYS[10] events         STREAM lifecycle events
-- KEYS[11] stats          HASH per-minute counters for queue.metrics()
-- ARGV[1] now             epoch ms ('' = Redis clock)
-- ARGV[2] limit           most jobs deleted by this call
-- ARGV[3] blocked         '1': blocked jobs too
-- ARGV[4] delayed         '1': delayed jobs too ('' keeps them)
-- ARGV[5] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[6] wakeChannel
-- ARGV[7] doneChannel
-- Returns: { jobs deleted, jobs left in the drained states (blocked and delayed counted only when asked) }
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include enqueue
-- @include append_errors
-- @include count_stats
-- @include settle_dependents
-- @include unlink_parents
-- @include release_dedupe
-- @include record_started
-- @include annex_fields
-- @include emit_event
-- @include batch_settle
-- @include chunked_call
-- @include chunked_hmget
-- @include group_hold

local jobs, annex, waiting, prio, delayed, deps = jobs_key, annex_key, waiting_key, prio_key, delayed_key, deps_key
local budget = tonumber(arg_limit)
local with_blocked = arg_blocked == '1'
local with_delayed = arg_delayed == '1'
local max_len = arg_events_max_len
local k = queue_keys
local now = current_time(arg_now)
local gk = group_keys(jobs)

-- Ids taken out of their structure, and the state each was taken in.
local taken, was = {}, {}
local function take(ids, state)
  for i = 1, #ids do
    taken[#taken + 1] = ids[i]
    was[ids[i]] = state
  end
  budget = budget - #ids
end

if with_blocked and budget > 0 then
  local ids = redis.call('HRANDFIELD', deps, budget)
  chunked_call('HDEL', deps, ids)
  take(ids, 'b')
end
if with_delayed and budget > 0 then
  local ids = redis.call('ZRANGE', delayed, 0, budget - 1)
  chunked_call('ZREM', delayed, ids)
  take(ids, 'd')
end
if budget > 0 then take(redis.call('LPOP', waiting, budget) or {}, 'w') end
if budget > 0 then
  local popped = redis.call('ZPOPMIN', prio, budget)
  local ids = {}
  for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
  take(ids, 'w')
end
-- Grouped waiting jobs: each group's list and prio zset, then its counts and place in the rotation.
if budget > 0 then
  local groups = redis.call('ZRANGEBYSCORE', gk.backlog, '(0', '+inf', 'LIMIT', 0, budget)
  for _, group in ipairs(groups) do
    if budget <= 0 then break end
    local base = gk.group .. group
    local ids = redis.call('LPOP', base .. ':w', budget) or {}
    if budget > #ids then
      local popped = redis.call('ZPOPMIN', base .. ':p', budget - #ids)
      for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
    end
    if #ids > 0 then
      redis.call('ZINCRBY', gk.backlog, -#ids, group)
      redis.call('DECRBY', gk.waiting, #ids)
      take(ids, 'w')
    end
    if group_size(gk, group) == 0 then redis.call('ZREM', gk.ready, group) end
    group_forget_if_idle(gk, group)
  end
end

-- Delete the records. An id whose record is gone or in another state (a stale entry) is skipped: its
-- entry is dropped, and a record elsewhere stays where it is.
local recs = chunked_hmget(jobs, taken)
local gone, settle, blocked_gone = {}, {}, {}
local woken = false
for i = 1, #taken do
  local id, rec = taken[i], recs[i]
  local state = was[id]
  if rec and string.sub(rec, 1, 1) == state then
    gone[#gone + 1] = id
    release_dedupe(jobs, id, rec, not record_started(rec))
    batch_settle(jobs, id, rec, false, now)
    local group = state == 'd' and record_group(rec)
    if group and group_unhold(gk, group, id, now) then woken = true end
    if state == 'b' then
      unlink_parents(k, id)
      -- Its children are blocked, so they are drained too: no failure to spread (but to children in
      -- other queues, below).
      redis.call('HDEL', k.dependents, id)
      blocked_gone[#blocked_gone + 1] = id
    else
      settle[#settle + 1] = id
    end
  end
end
chunked_call('HDEL', jobs, gone)
if #gone > 0 and redis.call('EXISTS', annex) == 1 then chunked_call('HDEL', annex, annex_fields(gone)) end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
emit_event(events_key, max_len, 'removed', gone)
emit_event(events_key, max_len, 'dead', (settle_dependents(k, now, {}, settle)))
notify_cross(k, now, blocked_gone, 'x')

local left = redis.call('LLEN', waiting) + redis.call('ZCARD', prio) + tonumber(redis.call('GET', gk.waiting) or '0')
if with_delayed then left = left + redis.call('ZCARD', delayed) end
if with_blocked then left = left + redis.call('HLEN', deps) end
return { #gone, left }
