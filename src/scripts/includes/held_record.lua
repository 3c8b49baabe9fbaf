-- @include pipe_positions
-- @include parse_record
-- The record of job `id` when it is active under fencing token `token` (the caller's attempt still
-- holds its lease), else nil: the check every fenced write of a running attempt makes first
-- (progress, step, set-data). Reads only the first two header fields.
local function held_record(jobs_key, id, token)
  local rec = redis.call('HGET', jobs_key, id)
  if not rec or string.sub(rec, 1, 1) ~= 'a' then return nil end
  local p = pipe_positions(rec, F_TOKEN, {})
  if string.sub(rec, p[F_STATE] + 1, p[F_TOKEN] - 1) ~= token then return nil end
  return rec
end
