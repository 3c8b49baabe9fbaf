#!lua flags=allow-oom
-- wait-children.lua: a running attempt waits for the children job.addChildren added (fenced by its
-- lease). When every child in its annex `id .. "\1c"` has its end in `id .. "\1k"` (child_ended.lua),
-- it answers them at once. Otherwise it parks the job: active -> blocked, `deps` `open|w` (the
-- children still open), the attempt's budget given back (it started, as for a snooze; no snooze is
-- counted), its slot and lease freed. The last child's end makes it waiting again.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (fields `\1c` children, `\1k` their ends)
-- KEYS[3] active          ZSET
-- KEYS[4] deps            HASH blocked job -> `remaining|i, s or w`
-- KEYS[5] meta            HASH (field `starved`)
-- KEYS[6] events          STREAM lifecycle events
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] id
-- ARGV[3] token           the fencing token of the caller's attempt
-- ARGV[4] wakeChannel     shard channel for idle workers
-- ARGV[5] eventsMaxLen    event stream cap (0 = no events)
-- Returns: { 'ready', children, ends } (the annex fields `\1c` and `\1k`, '' when none),
--   { 'parked', open count }, or { 'stale' } (the caller no longer holds the job)
-- @include current_time
-- @include parse_record
-- @include park_attempt

local jobs, annex, id = jobs_key, annex_key, arg_id
local rec = redis.call('HGET', jobs, id)
if not rec then return { 'stale' } end
local f, nl = parse_record(rec)
if f[F_TOKEN] ~= arg_token then return { 'stale' } end
if f[F_STATE] ~= 'a' then
  -- The same park re-sent after a lost reply: it stands.
  local d = f[F_STATE] == 'b' and redis.call('HGET', deps_key, id)
  if d and string.sub(d, -2) == '|w' then return { 'parked', tonumber(string.sub(d, 1, -3)) } end
  return { 'stale' }
end
local children = redis.call('HGET', annex, id .. '\1c') or ''
local ends = redis.call('HGET', annex, id .. '\1k') or ''
local open = 0
for ref in string.gmatch(children, '([^\t\n]*\t[^\t\n]*)\t[^\n]*') do
  if not string.find('\n' .. ends, '\n' .. ref .. '\t', 1, true) then open = open + 1 end
end
if open == 0 then return { 'ready', children, ends } end

-- Park: blocked until its last child ends, due now then (released to waiting, not delayed).
local now = current_time(arg_now)
park_attempt(queue_keys, id, f, rec, nl, 'b', now, now, arg_events_max_len)
redis.call('HSET', deps_key, id, open .. '|w')
return { 'parked', open }
