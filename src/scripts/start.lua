#!lua flags=allow-oom
-- start.lua: start marks for jobs whose processor a worker started (active, leased, not yet marked ->
-- marked started): attempts + 1, startedAt = now (includes/mark_starts.lua). This is the one place an
-- attempt is counted. The worker never waits for it: marks go with its next completion call
-- (complete.lua's `starts`), or here, once per event-loop turn, when no completion is due. Idempotent
-- (a job already marked under the token is left alone), so a call whose reply was lost is sent again.
-- Any number of jobs per call: multi-value commands go in slices of at most 1000 values.
-- KEYS[1] jobs            HASH id -> record
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2..] repeated: id, token
--   token: the fencing token the worker got with the job from claim (or a handoff)
-- Returns: { id, ... } of jobs whose lease this worker no longer holds (their attempt must stop)
-- @include current_time
-- @include int_text
-- @include mark_starts

local now = current_time(arg_now)
local ids, tokens = {}, {}
for i = 1, (#ARGV - 1) / 2 do
  ids[i] = ARGV[i * 2]
  tokens[i] = ARGV[i * 2 + 1]
end
return mark_starts(jobs_key, ids, tokens, int_text(now))
