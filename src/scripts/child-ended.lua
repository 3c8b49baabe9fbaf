#!lua flags=allow-oom
-- child-ended.lua: in a parent's queue, a child job.addChildren added in another hash tag ended
-- (its queue's `wnotify` outbox, src/queue/children.ts): the parent records the end and, parked for
-- its children, counts it off (includes/child_ended.lua). Idempotent: a second delivery changes nothing.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (field `\1k`: the children's ends)
-- KEYS[3] waiting         LIST
-- KEYS[4] prio            ZSET
-- KEYS[5] seq             STRING
-- KEYS[6] delayed         ZSET
-- KEYS[7] deps            HASH blocked job -> `remaining|i, s or w`
-- ARGV[1] now             epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel     shard channel for idle workers
-- ARGV[3] parent          the parent's id
-- ARGV[4] parentCreated   the parent's creation time as the child knew it (another job of that id takes nothing)
-- ARGV[5] childQueue      the child's queue
-- ARGV[6] child           the child's id
-- ARGV[7] outcome         'c' completed, 'x' dead (or removed)
-- ARGV[8] result          the child's result (JSON, '' = undefined or none)
-- Returns: 'released' (the parent waits to run again), 'counted', or 'none'
-- @include current_time
-- @include child_ended

return child_ended(queue_keys, arg_parent, arg_parent_created, arg_child_queue, arg_child, arg_outcome, arg_result, current_time(arg_now))
