#!lua flags=allow-oom
-- cross-resolve.lua: in a child's queue, a parent of another queue finished (dependsOn `{ queue, id }`):
-- it leaves the child's pending parents (annex `child\1y`), and only that removal counts, so delivering
-- the same notification twice changes nothing. A completed parent (or a dead one the child ignores)
-- takes one from `deps`; at 0 the child goes to waiting (or delayed until its runAt). A dead parent
-- fails the child with a DependencyFailedError, cascading to its own children, in this queue
-- (includes/settle_dependents.lua) and in others (notified through this queue's `xnotify` outbox).
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs, parents
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] delayed         ZSET
-- KEYS[7] dead            ZSET
-- KEYS[8] deps            HASH blocked child -> `remaining parents|i or s`
-- KEYS[9] dependents      HASH parent -> its blocked children, newline-separated
-- KEYS[10] stats          HASH per-minute counters for queue.metrics()
-- KEYS[11] events         STREAM lifecycle events
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel     shard channel for idle workers
-- ARGV[3] doneChannel     shard channel for waitFor
-- ARGV[4] eventsMaxLen    event stream cap (0 = no events)
-- ARGV[5] child           the child's id
-- ARGV[6] parent          the parent: `queue \t partition \t id` (partition '' in a queue of one)
-- ARGV[7] outcome         'c' completed, 'x' dead (or gone)
-- ARGV[8] link            the child's link number the notification carries (annex `child\1y`'s
--                         first line, `#n`): another number is an earlier job of the same id
-- Returns: 'released' (now waiting or delayed), 'counted' (other parents remain), 'failed' (dead,
--   with `notified`: 1 when its end queued notifications for children in other queues, else 0), or
--   'none' (the child is not blocked on that parent: delivered before, the child left `blocked`, or
--   the notification is an earlier job's of this id)
-- @include current_time
-- @include settle_dependents
-- @include unlink_parents
-- @include emit_event

local k = queue_keys
local child, parent = arg_child, arg_parent
local rec = redis.call('HGET', jobs_key, child)
if not rec or string.sub(rec, 1, 1) ~= 'b' then return { 'none', 0 } end
local pending = redis.call('HGET', annex_key, child .. '\1y')
if not pending then return { 'none', 0 } end
local kept, found, number = {}, false, nil
for ref in string.gmatch(pending, '[^\n]+') do
  if number == nil then
    number = ref
  elseif ref == parent and not found then
    found = true
  else
    kept[#kept + 1] = ref
  end
end
-- A notification for an earlier job of this id (removed and added again before it was delivered).
if number ~= '#' .. arg_link then return { 'none', 0 } end
local d = found and redis.call('HGET', deps_key, child)
if not d then return { 'none', 0 } end
if #kept == 0 then
  redis.call('HDEL', annex_key, child .. '\1y')
else
  redis.call('HSET', annex_key, child .. '\1y', number .. '\n' .. table.concat(kept, '\n'))
end
local now = current_time(arg_now)
local sep = string.find(d, '|', 1, true)
local remaining, ignore = tonumber(string.sub(d, 1, sep - 1)), string.sub(d, sep + 1) == 'i'
if arg_outcome == 'x' and not ignore then
  local q, _, pid = string.match(parent, '^([^\t]*)\t([^\t]*)\t(.*)$')
  fail_blocked(k, child, rec, pid .. ' of queue ' .. q, now)
  unlink_parents(k, child)
  redis.call('HDEL', annex_key, child .. '\1y')
  redis.call('SPUBLISH', arg_done_channel, 'x\n' .. child)
  count_stats(stats_key, now, 'x', 1)
  emit_event(events_key, arg_events_max_len, 'dead', { child })
  local failed, queued = settle_dependents(k, now, {}, { child })
  emit_event(events_key, arg_events_max_len, 'dead', failed)
  return { 'failed', (queued > 0) and 1 or 0 }
end
if remaining > 1 then
  redis.call('HSET', deps_key, child, (remaining - 1) .. '|' .. (ignore and 'i' or 's'))
  return { 'counted', 0 }
end
local state, woke = release_blocked(k, child, rec, now)
if woke then redis.call('SPUBLISH', arg_wake_channel, 'w') end
if state == 'd' then redis.call('SPUBLISH', arg_wake_channel, 'd') end
return { 'released', 0 }
