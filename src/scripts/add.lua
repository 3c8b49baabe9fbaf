-- add.lua: add one or many jobs (-> waiting, or -> delayed when due later). Idempotent by id: an id
-- that exists (or repeats within the call) is reported with its state and nothing is written for it.
-- Generated ids come from a counter, skipping any id a caller already used.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] waiting       LIST
-- KEYS[3] prio          ZSET
-- KEYS[4] seq           STRING
-- KEYS[5] delayed       ZSET
-- KEYS[6] ids           STRING
-- KEYS[7] events        STREAM lifecycle events
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel   shard channel for idle workers
-- ARGV[3] eventsMaxLen  event stream cap (0 = no events)
-- ARGV[4..] repeated: id, priority, delayMs, runAt, optionTail, data
--   id ('' = generate), priority (integer), delayMs ('' = none), runAt (epoch ms, '' = none),
--   optionTail (header fields 9.. in Lua numbering, see job-record.ts), data (JSON)
-- Returns: { id, isNew (1|0), state letter, ... } per job, in order
-- @include current_time
-- @include parse_record
-- @include enqueue
-- @include announce_delayed
-- @include emit_event

local jobs, waiting, prio, seq, delayed, ids_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = current_time(ARGV[1])
local FIXED = 3
local n = (#ARGV - FIXED) / 6

-- Assign generated ids in one INCRBY.
local generated = 0
for i = 0, n - 1 do
  if ARGV[FIXED + 1 + i * 6] == '' then generated = generated + 1 end
end
local next_id = 0
if generated > 0 then next_id = redis.call('INCRBY', ids_key, generated) - generated + 1 end

local ids = {}
for i = 0, n - 1 do
  local id = ARGV[FIXED + 1 + i * 6]
  if id == '' then
    id = tostring(next_id)
    next_id = next_id + 1
  end
  ids[i + 1] = id
end

local existing = redis.call('HMGET', jobs, unpack(ids))
local out, records, to_list, delayed_args = {}, {}, {}, {}
local seen, woken, min_due = {}, false, nil
for i = 1, n do
  local base = FIXED + 1 + (i - 1) * 6
  local id = ids[i]
  if existing[i] and ARGV[base] == '' then
    -- A caller used this number as its own id: draw fresh numbers until one is free.
    repeat
      id = tostring(redis.call('INCR', ids_key))
    until redis.call('HEXISTS', jobs, id) == 0
    existing[i] = false
  end
  if existing[i] then
    out[#out + 1] = id
    out[#out + 1] = 0
    out[#out + 1] = string.sub(existing[i], 1, 1)
  elseif seen[id] then
    out[#out + 1] = id
    out[#out + 1] = 0
    out[#out + 1] = seen[id]
  else
    local priority = tonumber(ARGV[base + 1])
    local due = nil
    if ARGV[base + 2] ~= '' then
      due = now + tonumber(ARGV[base + 2])
    elseif ARGV[base + 3] ~= '' then
      due = tonumber(ARGV[base + 3])
    end
    local state = 'w'
    if due ~= nil and due > now then state = 'd' end
    records[#records + 1] = id
    records[#records + 1] = state .. '||0||' .. now .. '|' .. (due or '') .. '|||' .. ARGV[base + 4] .. '\n' .. ARGV[base + 5]
    if state == 'd' then
      delayed_args[#delayed_args + 1] = due
      delayed_args[#delayed_args + 1] = id
      if min_due == nil or due < min_due then min_due = due end
    elseif priority == 0 then
      to_list[#to_list + 1] = id
    else
      -- Written below with the other records; enqueue only touches the prio zset here.
      if enqueue(waiting, prio, seq, id, priority, false) then woken = true end
    end
    seen[id] = state
    out[#out + 1] = id
    out[#out + 1] = 1
    out[#out + 1] = state
  end
end

if #records > 0 then redis.call('HSET', jobs, unpack(records)) end
if #to_list > 0 and redis.call('RPUSH', waiting, unpack(to_list)) == #to_list then woken = true end
if #delayed_args > 0 then
  redis.call('ZADD', delayed, unpack(delayed_args))
  announce_delayed(delayed, ARGV[2], min_due)
end
if woken then redis.call('SPUBLISH', ARGV[2], 'w') end
if #records > 0 then
  local added = {}
  for i = 1, #records, 2 do added[#added + 1] = records[i] end
  emit_event(KEYS[7], tonumber(ARGV[3]), 'added', added)
end
return out
