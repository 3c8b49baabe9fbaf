#!lua
-- add-one.lua: add one plain job (-> waiting, or -> delayed when due later): the interactive path's
-- add (queue.add of a job without parents, group, dedupe key, priority or batch), which is add.lua's
-- result for such a job with a fraction of its arguments and work. Idempotent by id: an id that exists
-- is reported with its state and nothing is written. A generated id is the counter's next number that
-- is not already a job's id. Refused (nothing written) when the queue's layout is not the caller's.
-- Handoff (waiting -> active in the add): when a worker's fetcher is registered as idle (claim.lua) and
-- the job could start now (includes/take_idle.lua; not delayed, no expiry, payload inline), the job
-- takes one unit of that registration and is leased to the fetcher here, as its claim would lease it
-- (fencing token, attempt counted, lease in `active`, the lease recorded in `claims` under
-- `<fetcher>.t` for its replay: includes/record_handoff.lua), and sent on the
-- fetcher's own channel. The worker starts it on the message: one hop from add to start instead of a
-- wake-up and a claim. If nobody listens on that channel (the worker is gone), nothing of the lease is
-- written and the job waits as usual. A message lost later (a dropped connection) costs no job: the
-- fetcher's next claim returns the job (claim.lua), or else its lease expires and recovery puts it back.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] waiting       LIST
-- KEYS[3] delayed       ZSET
-- KEYS[4] ids           STRING
-- KEYS[5] events        STREAM lifecycle events
-- KEYS[6] annex         HASH annex: large payloads (field id .. "\1b")
-- KEYS[7] meta          HASH queue settings: `partitions` (on the unpartitioned tag), `moved`
-- KEYS[8] expiring      ZSET unstarted jobs with an expiry, by expireAt (see expire.lua)
-- KEYS[9] idle          ZSET fetchers registered for a handoff (claim.lua)
--   (A handoff also uses the queue's `prio`, `active`, `tokens`, `seq` and `claims` keys and the
--   fetcher's channel `hand:<fetcher>`, named from the hash tag: only that rare path needs them.)
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel   shard channel for idle workers
-- ARGV[3] eventsMaxLen  event stream cap (0 = no events)
-- ARGV[4] partitions    the caller's partition count (refused if the queue records another)
-- ARGV[5] idSuffix      appended to a generated id ('@<partition>' in a partitioned queue, else '')
-- ARGV[6] id            '' = generate
-- ARGV[7] delayMs       '' = none
-- ARGV[8] runAt         epoch ms, '' = none
-- ARGV[9] optionTail    header fields 9.. in Lua numbering (see job-record.ts)
-- ARGV[10] data         JSON
-- ARGV[11] ttlMs        '' = none: the job expires at now + ttlMs on Redis's clock (an expireAt given
--                       instead comes in the option tail)
-- ARGV[12] leaseMs      the lease of a job handed off without a leaseMs of its own
-- Events: `added` (and `active` when handed off), or `duplicated` when the id exists.
-- Returns: { id, isNew (1|0), state letter } as add.lua does for one job ('a' when handed off);
--   error `SURETY_PARTITIONS <n>` when this tag belongs to a queue of n partitions (or was moved)
-- @include current_time
-- @include new_record
-- @include layout_refusal
-- @include announce_delayed
-- @include emit_event
-- @include body_marker
-- @include take_idle
-- @include next_tokens
-- @include int_text
-- @include lease_record
-- @include active_sentinel
-- @include record_handoff
-- @include enqueue
-- @include tail_lifo

local jobs, waiting, delayed, ids_key = jobs_key, waiting_key, delayed_key, ids_key
local refusal = layout_refusal(meta_key, arg_partitions)
if refusal then return refusal end

local now = current_time(arg_now)
local due = nil
if arg_delay_ms ~= '' then
  due = now + tonumber(arg_delay_ms)
elseif arg_run_at ~= '' then
  due = tonumber(arg_run_at)
end
local state = (due ~= nil and due > now) and 'd' or 'w'
local data = arg_data
local large = #data > BODY_INLINE_MAX
local record, expire_at = new_record(state, now, due, '', arg_option_tail, large and BODY_MARKER or data, arg_ttl_ms)

local idle, taker, taker_deadline = idle_key, nil, nil
if state == 'w' and not large and (expire_at == nil or expire_at == '') then
  taker, taker_deadline = take_idle(idle, jobs, meta_key, waiting, now)
end

-- HSETNX both checks that the id is free and writes the record.
local id = arg_id
if id ~= '' then
  if redis.call('HSETNX', jobs, id, record) == 0 then
    if taker then redis.call('ZADD', idle, taker_deadline, taker) end
    emit_event(events_key, arg_events_max_len, 'duplicated', { id })
    return { id, 0, string.sub(redis.call('HGET', jobs, id), 1, 1) }
  end
else
  repeat
    id = string.format('%d', redis.call('INCR', ids_key)) .. arg_id_suffix
  until redis.call('HSETNX', jobs, id, record) == 1
end

if taker then
  -- `<fetcher>|<nonce>|<unit>` (`<fetcher>|<nonce>` from a worker of the previous version)
  local fetcher, nonce = string.match(taker, '^([^|]*)|([^|]*)')
  local claims, field = tag_key(jobs, 'claims'), fetcher .. '.t'
  local now_s = int_text(now)
  local token = string.format('%d', next_tokens(tag_key(jobs, 'tokens'), tag_key(jobs, 'seq'), 1)) .. '.' .. now_s
  local leased, lease = lease_record(record, token)
  -- The message: `<nonce>|<now>|<length of id>|<id><record>` (ids and records may hold any byte).
  local message = nonce .. '|' .. now_s .. '|' .. #id .. '|' .. id .. leased
  if redis.call('SPUBLISH', tag_key(jobs, 'hand:' .. fetcher), message) > 0 then
    local deadline = now + (lease or tonumber(arg_lease_ms))
    local active = tag_key(jobs, 'active')
    redis.call('HSET', jobs, id, leased)
    redis.call('ZADD', active, 'NX', 'inf', ACTIVE_SENTINEL)
    redis.call('ZADD', active, int_text(deadline), id)
    -- Recorded with the registration's other handoffs, for the withdrawing claim's replay.
    local prev_expiry, prev_lines = handoff_record(claims, field, nonce)
    record_handoff(claims, field, nonce, now, token, prev_expiry, prev_lines, id, deadline)
    emit_event(events_key, arg_events_max_len, 'added', { id })
    emit_event(events_key, arg_events_max_len, 'active', { id })
    return { id, 1, 'a' }
  end
end

-- A large payload lives in the annex (see add.lua).
if large then redis.call('HSET', annex_key, id .. '\1b', data) end
if expire_at and expire_at ~= '' then redis.call('ZADD', expiring_key, expire_at, id) end
if state == 'd' then
  redis.call('ZADD', delayed, due, id)
  announce_delayed(delayed, arg_wake_channel, due)
else
  -- Jobs due by now go first (includes/enqueue.lua), then this one at the back (or, lifo, the front);
  -- the list was empty: idle workers must be woken.
  local promoted = redis.call('EXISTS', delayed) == 1
    and promote_due(jobs, waiting, tag_key(jobs, 'prio'), tag_key(jobs, 'seq'), delayed, now, 1000) > 0
  -- A lifo tail holds at least 15 characters: a plain job's (`|||`) pays a length test, not a call.
  local lifo = #arg_option_tail > 14 and tail_lifo(arg_option_tail)
  if redis.call(lifo and 'LPUSH' or 'RPUSH', waiting, id) == 1 or promoted then
    redis.call('SPUBLISH', arg_wake_channel, 'w')
  end
end
emit_event(events_key, arg_events_max_len, 'added', { id })
return { id, 1, state }
