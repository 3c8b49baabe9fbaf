-- @include record_group
-- @include enqueue
-- @include create_job
-- @include announce_delayed
-- @include emit_event
-- @include body_marker
-- Batches (queue.addBatch): every member's record carries its batch id (header field 19, F_BATCH), and
-- the batch is the hash `{tag}:b:<id>` (src/store/keys.ts batchKey): total, pending, completed, dead, deadIds
-- (the first BATCH_DEAD_IDS_MAX dead members, newline-separated), createdAt, finishedAt, callbackId, and
-- the callback spec written by add.lua (cbId, cbPriority, cbDelayMs, cbRunAt, cbTail, cbData, sfx, ev).
-- A member is counted once per transition out of an unfinished state (waiting, delayed, blocked,
-- active) into completed or dead; removed or cancelled unfinished members count as dead. Only the
-- scripts making such a transition call batch_settle, so a re-sent or stale outcome, a retried attempt
-- or a recovered lease counts nothing. When pending reaches 0 the batch finishes: finishedAt is set, the
-- hash expires BATCH_KEEP_MS later, and the callback job (if any) is created in the same call.
-- A finished (or expired) batch is never counted again: members retried afterwards are outside it.
-- Records without a batch pay one anchored match.
local BATCH_PATTERN = '^' .. string.rep('[^|\n]*|', 19) .. '([^|\n]*)'
local BATCH_DEAD_IDS_MAX = 100
local BATCH_KEEP_MS = 7 * 24 * 3600 * 1000

-- The batch key of a record, or nil when the job is not in a batch.
local function batch_key(jobs_key, rec)
  if not long_header(rec) then return nil end
  local b = string.match(rec, BATCH_PATTERN)
  if not b or b == '' then return nil end
  return string.match(jobs_key, '^({[^}]*}:)') .. 'b:' .. b, b
end

-- The batch finished: stamp it, start its retention, and create its callback job (once: pending
-- reaches 0 once, and a finished batch is never counted again).
local function batch_finish(jobs_key, key, b, now)
  local base = string.match(jobs_key, '^({[^}]*}:)')
  local s = redis.call('HMGET', key, 'total', 'completed', 'dead', 'deadIds', 'cbTail', 'cbId', 'cbPriority',
    'cbDelayMs', 'cbRunAt', 'cbData', 'sfx', 'ev')
  redis.call('HSET', key, 'finishedAt', now)
  redis.call('PEXPIRE', key, BATCH_KEEP_MS)
  if not s[5] then return end
  local id = s[6]
  if id == '' then
    repeat
      id = string.format('%d', redis.call('INCR', base .. 'ids')) .. s[11]
    until redis.call('HEXISTS', jobs_key, id) == 0
  end
  local dead_ids = {}
  for d in string.gmatch(s[4] or '', '[^\n]+') do dead_ids[#dead_ids + 1] = cjson.encode(d) end
  local data = '{"batch":' .. cjson.encode(b) .. ',"total":' .. s[1] .. ',"completed":' .. s[2] .. ',"dead":' .. s[3]
    .. ',"deadIds":[' .. table.concat(dead_ids, ',') .. ']' .. (s[10] ~= '' and (',"data":' .. s[10]) or '') .. '}'
  local due = now
  if s[8] ~= '' then due = now + tonumber(s[8]) elseif s[9] ~= '' then due = tonumber(s[9]) end
  local body = data
  if #data > BODY_INLINE_MAX then body = BODY_MARKER end
  if redis.call('HEXISTS', jobs_key, id) == 1 then
    -- An explicit callback id that exists: that job stands (like an add of an existing id).
    redis.call('HSET', key, 'callbackId', id)
    return
  end
  if body == BODY_MARKER then redis.call('HSET', base .. 'errors', id .. '\1b', data) end
  local wake = base .. 'wake'
  if create_job(jobs_key, base .. 'waiting', base .. 'prio', base .. 'seq', base .. 'delayed', id, now, due,
    tonumber(s[7]), s[5], body) then
    redis.call('SPUBLISH', wake, 'w')
  end
  if due > now then announce_delayed(base .. 'delayed', wake, due) end
  redis.call('HSET', key, 'callbackId', id)
  emit_event(base .. 'events', s[12], 'added', { id })
end

-- Member `id` (record `rec`, before the transition) left its unfinished state: completed when `ok`,
-- else dead (failed for good, cancelled, removed, its parent died, expired).
local function batch_settle(jobs_key, id, rec, ok, now)
  local key, b = batch_key(jobs_key, rec)
  if not key then return end
  local pending = tonumber(redis.call('HGET', key, 'pending'))
  if not pending or pending <= 0 then return end
  if ok then
    redis.call('HINCRBY', key, 'completed', 1)
  else
    redis.call('HINCRBY', key, 'dead', 1)
    local list = redis.call('HGET', key, 'deadIds') or ''
    local _, count = string.gsub(list, '\n', '')
    if list == '' then
      redis.call('HSET', key, 'deadIds', id)
    elseif count + 1 < BATCH_DEAD_IDS_MAX then
      redis.call('HSET', key, 'deadIds', list .. '\n' .. id)
    end
  end
  if redis.call('HINCRBY', key, 'pending', -1) == 0 then batch_finish(jobs_key, key, b, now) end
end

-- A finished member (`was`: 'c' or 'x') is retried: while its batch is unfinished it counts as pending
-- again (and leaves deadIds); once the batch has finished, the batch is left as it is.
local function batch_reopen(jobs_key, id, rec, was)
  local key = batch_key(jobs_key, rec)
  if not key then return end
  local pending = tonumber(redis.call('HGET', key, 'pending'))
  if not pending or pending <= 0 then return end
  redis.call('HINCRBY', key, 'pending', 1)
  if was == 'c' then
    redis.call('HINCRBY', key, 'completed', -1)
  else
    redis.call('HINCRBY', key, 'dead', -1)
    local list = redis.call('HGET', key, 'deadIds')
    if list then
      local kept = {}
      for d in string.gmatch(list, '[^\n]+') do
        if d ~= id then kept[#kept + 1] = d end
      end
      redis.call('HSET', key, 'deadIds', table.concat(kept, '\n'))
    end
  end
end
