-- complete.lua: record the outcome of finished attempts (active -> completed), many per call. An
-- outcome is accepted only with the attempt's fencing token while the job is still active; a token the
-- job has moved past (its lease expired and it was recovered) is refused, so the newer attempt stands.
-- Re-sending an accepted completion (a reply lost to a dropped connection) is a no-op.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] errors          HASH id -> error lines
-- KEYS[3] active          ZSET
-- KEYS[4] completed       ZSET
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] keepCount       retention: completed jobs kept (0 = delete at once)
-- ARGV[3] keepAgeMs       retention: completed jobs older than this are deleted
-- ARGV[4] limit           most jobs trimmed per call
-- ARGV[5] doneChannel     shard channel for waitFor
-- ARGV[6..] repeated: id, token, result
--   token (attempt number), result (JSON, '' = undefined)
-- Returns: { id, reason, ... } for each refused outcome; reason is `STALE:<state>:<attempts>` or `NOT_FOUND`
-- @include current_time
-- @include parse_record
-- @include trim_finished

local jobs, errors, active, completed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = current_time(ARGV[1])
local keep_count = tonumber(ARGV[2])
local n = (#ARGV - 5) / 3

local ids = {}
for i = 1, n do ids[i] = ARGV[6 + (i - 1) * 3] end
local recs = redis.call('HMGET', jobs, unpack(ids))

local refused, done, updated, scores = {}, {}, {}, {}
for i = 1, n do
  local base = 6 + (i - 1) * 3
  local rec = recs[i]
  if not rec then
    refused[#refused + 1] = ids[i]
    refused[#refused + 1] = 'NOT_FOUND'
  else
    local f, nl = parse_record(rec)
    if f[1] == 'a' and f[2] == ARGV[base + 1] then
      f[1] = 'c'
      f[7] = now
      done[#done + 1] = ids[i]
      updated[#updated + 1] = ids[i]
      updated[#updated + 1] = table.concat(f, '|') .. string.sub(rec, nl) .. '\n' .. ARGV[base + 2]
      scores[#scores + 1] = now
      scores[#scores + 1] = ids[i]
    elseif not (f[1] == 'c' and f[2] == ARGV[base + 1]) then
      refused[#refused + 1] = ids[i]
      refused[#refused + 1] = 'STALE:' .. f[1] .. ':' .. f[2]
    end
  end
end

if #done > 0 then
  redis.call('ZREM', active, unpack(done))
  if keep_count == 0 then
    redis.call('HDEL', jobs, unpack(done))
    redis.call('HDEL', errors, unpack(done))
  else
    redis.call('HSET', jobs, unpack(updated))
    redis.call('ZADD', completed, unpack(scores))
    trim_finished(completed, jobs, errors, now, keep_count, tonumber(ARGV[3]), tonumber(ARGV[4]))
  end
  redis.call('SPUBLISH', ARGV[5], 'c\n' .. table.concat(done, '\n'))
end
return refused
