#!lua flags=allow-oom
-- change-priority.lua: give a job that has not started a new priority (queue.changePriority):
-- waiting, delayed or blocked. A waiting job moves to the back of its new priority (a lifo job: the
-- front) in the claim order (negative priorities first, then priority 0 FIFO, then positive ones: includes/enqueue.lua),
-- inside its group's list when it has a group; the group keeps its place in the rotation. The same
-- priority again changes nothing (the job keeps its place). A delayed or blocked job keeps the new
-- priority for when it becomes waiting.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] waiting         LIST
-- KEYS[3] prio            ZSET
-- KEYS[4] seq             STRING
-- ARGV[1] id
-- ARGV[2] priority        integer, -1000000 .. 1000000 (checked by the client)
-- Returns: 'OK', 'NOT_FOUND' or 'INVALID_STATE:<state letter>' (active, completed, dead)
-- @include parse_record
-- @include with_header
-- @include current_time
-- @include enqueue
-- @include record_group

local jobs, waiting, prio, seq = jobs_key, waiting_key, prio_key, seq_key
local id, priority = arg_id, tonumber(arg_priority)
local rec = redis.call('HGET', jobs, id)
if not rec then return 'NOT_FOUND' end
local f, nl = parse_record(rec)
local state = f[F_STATE]
if state ~= 'w' and state ~= 'd' and state ~= 'b' then return 'INVALID_STATE:' .. state end
if (tonumber(f[F_PRIORITY]) or 0) == priority then return 'OK' end
-- '' is the library default (0), as the client writes it.
f[F_PRIORITY] = priority == 0 and '' or arg_priority
redis.call('HSET', jobs, id, with_header(f, rec, nl))
if state == 'w' then
  local group = record_group(rec)
  if group then
    local base = group_keys(jobs).group .. group
    waiting, prio, seq = base .. ':w', base .. ':p', base .. ':s'
  end
  -- Still waiting and not claimed: the job is in exactly one of the two structures.
  if redis.call('ZREM', prio, id) == 0 then redis.call('LREM', waiting, 1, id) end
  -- At the back of its new priority (a lifo job: the front).
  enqueue_in(waiting, prio, seq, id, priority, f[F_LIFO] == '1')
end
return 'OK'
