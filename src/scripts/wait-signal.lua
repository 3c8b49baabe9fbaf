#!lua flags=allow-oom
-- wait-signal.lua: a running attempt waits for signal `name` (job.waitForSignal). In one step it takes
-- the oldest pending signal of that name (queue.signal stored it in the annex field `id .. "\1g"`)
-- and stores its payload as the wait's durable step, so the signal is consumed once and a later
-- attempt replays it; or, past the wait's deadline, stores the timeout the same way; or parks the
-- job: active -> delayed until the deadline (or without end), the wait noted in `id .. "\1w"`, the
-- attempt's budget given back (it started, as for a snooze; no snooze is counted), its slot and
-- lease freed. signal.lua wakes a parked job whose wait names the signal it brings. Fenced: only the
-- attempt holding the lease takes a signal or parks.
-- The wait's deadline is fixed the first time the wait is reached (step `~wait:<n>`, in Redis time
-- or the injected clock), so a job woken early or re-run keeps it.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (fields `\1s` steps, `\1g` pending signals, `\1w` the wait)
-- KEYS[3] active          ZSET
-- KEYS[4] delayed         ZSET
-- KEYS[5] meta            HASH (field `starved`)
-- KEYS[6] events          STREAM lifecycle events
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] id
-- ARGV[3] token           the fencing token of the caller's attempt
-- ARGV[4] name            the signal's name (no tab or newline: checked by the client)
-- ARGV[5] n               the wait's number in the attempt: steps `~wait:<n>` (deadline) and `~signal:<n>`
-- ARGV[6] timeoutMs       0 = wait without end
-- ARGV[7] maxBytes        the most bytes the steps field of one job may hold
-- ARGV[8] wakeChannel     shard channel for idle workers
-- ARGV[9] eventsMaxLen    event stream cap (0 = no events)
-- Returns: { 'taken', payload json ('' = undefined) }, { 'timeout', '' }, { 'stored', the wait's
--   step json } (it ended already: the same wait sent again), { 'parked', deadline
--   ('' = none) }, { 'stale', '' } (the caller no longer holds the job), or { 'too_large', '' } (the
--   payload would take the steps past maxBytes: nothing taken)
-- @include current_time
-- @include parse_record
-- @include int_text
-- @include park_attempt
-- @include announce_delayed

-- A parked job waiting without a deadline sits in `delayed` at this score: never due (Date's maximum).
local NEVER = 8640000000000000

local jobs, annex, id = jobs_key, annex_key, arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return { 'stale', '' } end
local f, nl = parse_record(rec)
if f[F_TOKEN] ~= arg_token then return { 'stale', '' } end
local wait_field = id .. '\1w'
if f[F_STATE] ~= 'a' then
  -- The same park re-sent after a lost reply: it stands.
  local w = redis.call('HGET', annex, wait_field)
  if f[F_STATE] == 'd' and w and string.sub(w, 1, #arg_name + 1) == arg_name .. '\t' then
    return { 'parked', string.sub(w, #arg_name + 2) }
  end
  return { 'stale', '' }
end

local now = current_time(arg_now)
local steps_field = id .. '\1s'
local steps = redis.call('HGET', annex, steps_field) or ''
local function store_step(name, json)
  local line = name .. '\t' .. json
  if #steps + #line + 1 > tonumber(arg_max_bytes) then return false end
  steps = steps == '' and line or (steps .. '\n' .. line)
  redis.call('HSET', annex, steps_field, steps)
  return true
end

-- What this wait ended with, if it did already (the same call sent again): that stands.
local ended = nil
for line in string.gmatch('\n' .. steps, '\n~signal:' .. arg_n .. '\t([^\n]*)') do ended = line end
if ended then return { 'stored', ended } end

-- The deadline: stored when the wait is first reached (a later line of the same step wins: the last).
local wait_step = '~wait:' .. arg_n
local deadline = nil
for line in string.gmatch('\n' .. steps, '\n' .. string.gsub(wait_step, '%p', '%%%0') .. '\t([^\n]*)') do
  deadline = tonumber(line)
end
if deadline == nil then
  local timeout = tonumber(arg_timeout_ms)
  deadline = timeout > 0 and now + timeout or 0
  if not store_step(wait_step, int_text(deadline)) then return { 'too_large', '' } end
end

-- The oldest pending signal of this name.
local sig_field = id .. '\1g'
local pending = redis.call('HGET', annex, sig_field)
if pending then
  local kept, payload = {}, nil
  for line in string.gmatch(pending, '[^\n]+') do
    if payload == nil and string.sub(line, 1, #arg_name + 1) == arg_name .. '\t' then
      payload = string.sub(line, #arg_name + 2)
    else
      kept[#kept + 1] = line
    end
  end
  if payload ~= nil then
    if not store_step('~signal:' .. arg_n, '{"payload":' .. (payload == '' and 'null' or payload) .. ',"u":'
      .. (payload == '' and 'true' or 'false') .. '}') then return { 'too_large', '' } end
    if #kept == 0 then redis.call('HDEL', annex, sig_field)
    else redis.call('HSET', annex, sig_field, table.concat(kept, '\n')) end
    redis.call('HDEL', annex, wait_field)
    return { 'taken', payload }
  end
end

if deadline > 0 and now >= deadline then
  store_step('~signal:' .. arg_n, '{"timedOut":true}')
  redis.call('HDEL', annex, wait_field)
  return { 'timeout', '' }
end

-- Park: delayed until the deadline (or never due), the wait noted.
local due = deadline > 0 and deadline or NEVER
park_attempt(queue_keys, id, f, rec, nl, 'd', due, now, arg_events_max_len)
redis.call('ZADD', delayed_key, due, id)
local shown = deadline > 0 and int_text(deadline) or ''
redis.call('HSET', annex, wait_field, arg_name .. '\t' .. shown)
announce_delayed(delayed_key, arg_wake_channel, due)
return { 'parked', shown }
