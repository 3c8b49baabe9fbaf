#!lua flags=allow-oom
-- expire.lua: the expiry sweep (part of the recovery pass, src/queue/recovery.ts). Jobs in `expiring` whose
-- expireAt has come and that have not started (waiting, delayed, blocked) end dead with an ExpiredError
-- (includes/expire_jobs.lua), taken out of their structure (a grouped job out of its group's list).
-- A job leased to a worker (active) is the worker's to start or hand back: it stays in the index, and
-- ends here or at a claim if it comes back unstarted. Entries whose job started, finished or was removed
-- meanwhile are dropped. Claims end expired jobs they meet themselves (claim.lua); this
-- sweep ends the ones no worker reaches: a stopped queue, a job delayed past its expiry, a blocked one.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] delayed         ZSET
-- KEYS[7] active          ZSET
-- KEYS[8] dead            ZSET
-- KEYS[9] deps            HASH blocked child -> `remaining parents|i or s`
-- KEYS[10] dependents     HASH parent -> its blocked children, newline-separated
-- KEYS[11] meta           HASH (field `starved`)
-- KEYS[12] events         STREAM lifecycle events
-- KEYS[13] stats          HASH per-minute counters for queue.metrics()
-- KEYS[14] expiring       ZSET unstarted jobs with an expiry, by expireAt
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] limit           most entries looked at per call
-- ARGV[3] keepCount       retention: dead jobs kept
-- ARGV[4] keepAgeMs       retention: dead jobs older than this are deleted
-- ARGV[5] wakeChannel     shard channel for idle workers
-- ARGV[6] doneChannel     shard channel for waitFor
-- ARGV[7] eventsMaxLen    event stream cap (0 = no events)
-- Returns: { id, ... } of the jobs that ended dead by expiry
-- @include current_time
-- @include chunked_call
-- @include chunked_hmget
-- @include unlink
-- @include unlink_parents
-- @include wake_starved
-- @include expire_jobs

local jobs, expiring = jobs_key, expiring_key
local now = current_time(arg_now)
local due = redis.call('ZRANGEBYSCORE', expiring, '-inf', now, 'LIMIT', 0, tonumber(arg_limit))
if #due == 0 then return {} end
local k = queue_keys
local recs = chunked_hmget(jobs, due)
local ids, old, stale = {}, {}, {}
for i = 1, #due do
  local id, rec = due[i], recs[i]
  local state = rec and string.sub(rec, 1, 1)
  local pending = state == 'w' or state == 'd' or state == 'b'
  if state == 'a' and parse_record(rec)[F_STARTED] == '' then
    -- Leased, not started: kept in the index (see above).
  elseif pending and is_expired(rec, now) then
    unlink(k, id, state, rec, now)
    if state == 'b' then unlink_parents(k, id) end
    ids[#ids + 1] = id
    old[#old + 1] = rec
  else
    stale[#stale + 1] = id
  end
end
chunked_call('ZREM', expiring, stale)
expire_jobs(k, ids, old, now, {
  keep_count = tonumber(arg_keep_count), keep_age = tonumber(arg_keep_age_ms), limit = tonumber(arg_limit),
  events_max = arg_events_max_len,
})
-- A reserved job left `active`: its group (or the global limit) may have room for a claim now.
wake_starved(meta_key, arg_wake_channel)
return ids
