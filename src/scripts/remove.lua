-- remove.lua: delete a job that is not active, with its record and error lines. An active job is
-- refused: its worker holds a lease on it (wait for it to finish, then remove it).
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] errors          HASH annex: error lines, progress, logs
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] delayed         ZSET
-- KEYS[6] completed       ZSET
-- KEYS[7] dead            ZSET
-- KEYS[8] events          STREAM lifecycle events
-- ARGV[1] id
-- ARGV[2] eventsMaxLen    event stream cap (0 = no events)
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:a'
-- @include annex_fields
-- @include emit_event

local jobs, errors, waiting, prio, delayed, completed, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local id = ARGV[1]
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local state = string.sub(rec, 1, 1)
if state == 'a' then return 'INVALID_STATE:a' end
if state == 'w' then
  -- LREM is O(n) in the list length; removing waiting jobs is an admin action, not a hot path.
  if redis.call('ZREM', prio, id) == 0 then redis.call('LREM', waiting, 1, id) end
elseif state == 'd' then
  redis.call('ZREM', delayed, id)
elseif state == 'c' then
  redis.call('ZREM', completed, id)
else
  redis.call('ZREM', dead, id)
end
redis.call('HDEL', jobs, id)
redis.call('HDEL', errors, unpack(annex_fields({ id })))
emit_event(KEYS[8], tonumber(ARGV[2]), 'removed', { id })
return 'OK'
