#!lua flags=allow-oom
-- switch-partitions.lua: repartition's switch on the queue's unpartitioned tag {prefix:queue}, in one
-- step: records the new partition count with the mark `movedFrom` (a move is under way, so a cut-off
-- run resumes), or, once every job and schedule has moved, clears the mark. One script because the
-- switch to one partition is two writes (drop the count, set the mark): a run cut off between them left
-- neither, and a new run then saw a queue of one partition with nothing to move.
-- allow-oom like set-paused: it adds a few bytes and no work, and clearing the mark must not be refused.
-- KEYS[1] meta          HASH of the unpartitioned tag: `partitions`, `moved`, `movedFrom`
-- ARGV[1] to            the new partition count (integer >= 1)
-- ARGV[2] from          the old count while the move is under way, or '' once it is done (clears the mark)
-- Returns: 1
local meta = meta_key
if arg_from == '' then
  redis.call('HDEL', meta, 'movedFrom')
elseif arg_to == '1' then
  -- Back to one partition: this tag holds the queue again, no count recorded (partitions.lua).
  redis.call('HDEL', meta, 'partitions', 'moved')
  redis.call('HSET', meta, 'movedFrom', arg_from)
else
  -- From one partition (this tag) to several: adds here are refused (`moved`), the count is recorded.
  redis.call('HSET', meta, 'moved', arg_to, 'partitions', arg_to, 'movedFrom', arg_from)
end
return 1
