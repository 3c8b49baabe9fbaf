#!lua flags=allow-oom
-- partitions.lua: records how many partitions a queue has, or checks a client's count against the
-- record, so a client configured with another count is refused instead of writing keys nobody reads.
-- Called on the queue's unpartitioned tag {prefix:queue}, whatever the partition count.
-- KEYS[1] meta          HASH of the unpartitioned tag: `partitions` (the record), `moved` (set by a
--                       migration away from one partition)
-- KEYS[2] jobs          HASH of the unpartitioned tag: jobs here mean a queue of one partition
-- ARGV[1] partitions    the caller's count (integer >= 1), or 0 to read the record only (`'auto'`)
-- Returns: { recorded count or 0 if none, 1 if the caller's count is accepted else 0 }
local layout = redis.call('HMGET', meta_key, 'partitions', 'moved')
local recorded = layout[2] or layout[1]
if recorded then
  return { tonumber(recorded), (recorded == arg_partitions or arg_partitions == '0') and 1 or 0 }
end
if arg_partitions == '1' or arg_partitions == '0' then
  -- One partition: nothing to record (the queue keeps its zero-footprint keys), nothing to refuse.
  return { 0, 1 }
end
if redis.call('EXISTS', jobs_key) == 1 then
  -- A queue of one partition already holds jobs here: partitioning it needs the migration command.
  return { 1, 0 }
end
redis.call('HSET', meta_key, 'partitions', arg_partitions)
return { tonumber(arg_partitions), 1 }
