#!lua
-- move-in.lua: writes jobs copied from another layout of the same queue (`surety repartition`) into
-- this partition, in the state they had there: waiting (back of its priority), delayed (same due
-- time), completed or dead (same finish time). A job whose id exists here already is skipped, so a
-- repartition cut off between the copy and the delete can simply run again.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] annex         HASH annex: error lines, progress, logs, parents, payloads
-- KEYS[3] waiting       LIST
-- KEYS[4] prio          ZSET
-- KEYS[5] seq           STRING
-- KEYS[6] delayed       ZSET
-- KEYS[7] completed     ZSET
-- KEYS[8] dead          ZSET
-- ARGV[1] wakeChannel   shard channel for idle workers
-- ARGV[2..] repeated: id, record, score, errors, progress, logs, parents, body, steps, crossParents, crossPending, signals, signalWait, children, childEnds, flowParent, waiter
--   record (the job record as stored), score (due time for delayed, finish time for completed and
--   dead, '' for waiting), then every annex field of the job in annex_fields order ('' = absent): a
--   sleeping job keeps its steps, a parked one its wait and its signals; then its `waiters` line
--   ('' = none): a child of job.addChildren that ended keeps its tombstone. A job of a workflow under
--   way (a child not ended, or a parent with children not ended) is not moved: their links name
--   the partition they are in
-- Returns: the number of jobs written (skipped ones are not counted);
--   error `SURETY_NOT_MOVABLE <id> <state>` for an active or blocked job, `SURETY_NOT_MOVABLE <id> f` for
--   a job of a workflow under way (nothing of that job is written)
-- @include parse_record
-- @include current_time
-- @include enqueue
-- @include record_group
-- @include annex_fields
-- @include tag_key
-- @include announce_delayed

local jobs, annex = jobs_key, annex_key
local FIXED, R = 1, 17
local written, woken, min_due = 0, false, nil
for i = 0, (#ARGV - FIXED) / R - 1 do
  local base = FIXED + 1 + i * R
  local id, rec, score = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  if redis.call('HEXISTS', jobs, id) == 0 then
    local f = parse_record(rec)
    local state = f[F_STATE]
    if state == 'a' or state == 'b' then
      return redis.error_reply('SURETY_NOT_MOVABLE ' .. id .. ' ' .. state)
    end
    local waiter, children, ends = ARGV[base + 16], ARGV[base + 13], ARGV[base + 14]
    local _, tabs = string.gsub(waiter, '\t', '')
    local open_child = false
    for ref in string.gmatch(children, '([^\t\n]*\t[^\t\n]*)\t[^\n]*') do
      if not string.find('\n' .. ends, '\n' .. ref .. '\t', 1, true) then open_child = true end
    end
    if tabs == 4 or open_child then return redis.error_reply('SURETY_NOT_MOVABLE ' .. id .. ' f') end
    if waiter ~= '' then
      redis.call('HSET', tag_key(jobs, 'waiters'), id, waiter)
      redis.call('ZADD', tag_key(jobs, 'wended'), current_time(''), id)
    end
    redis.call('HSET', jobs, id, rec)
    local fields = annex_fields({ id })
    for k = 1, #fields do
      if ARGV[base + 2 + k] ~= '' then redis.call('HSET', annex, fields[k], ARGV[base + 2 + k]) end
    end
    if state == 'w' then
      if enqueue(waiting_key, prio_key, seq_key, id, tonumber(f[F_PRIORITY]) or 0, false, record_group(rec), current_time('')) then woken = true end
    elseif state == 'd' then
      redis.call('ZADD', delayed_key, score, id)
      if min_due == nil or tonumber(score) < min_due then min_due = tonumber(score) end
    elseif state == 'c' then
      redis.call('ZADD', completed_key, score, id)
    else
      redis.call('ZADD', dead_key, score, id)
    end
    written = written + 1
  end
end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
announce_delayed(delayed_key, arg_wake_channel, min_due)
return written
