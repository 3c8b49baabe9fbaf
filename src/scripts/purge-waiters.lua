#!lua flags=allow-oom
-- purge-waiters.lua: deletes the tombstones of `waiters` (children of job.addChildren that ended)
-- older than a cutoff, up to `limit`: by then their parents know the end (delivered at the end, or
-- from the `wnotify` outbox within a recovery pass), and a replayed addChildren finds it there. An
-- entry that is not a tombstone (a child of that id added again, unfinished) is kept.
-- KEYS[1] waiters         HASH child id -> `parent tag \t parent id \t parent queue \t parent
--                         createdAt \t child queue[ \t outcome]`
-- KEYS[2] wended          ZSET child id -> when it ended
-- ARGV[1] cutoff          epoch ms: tombstones from before it go
-- ARGV[2] limit           most entries per call
-- Returns: how many index entries it took out
local ids = redis.call('ZRANGEBYSCORE', wended_key, '-inf', '(' .. arg_cutoff, 'LIMIT', 0, tonumber(arg_limit))
for _, id in ipairs(ids) do
  local line = redis.call('HGET', waiters_key, id)
  local _, tabs = string.gsub(line or '', '\t', '')
  if tabs == 5 then redis.call('HDEL', waiters_key, id) end
end
if #ids > 0 then redis.call('ZREM', wended_key, unpack(ids)) end
return #ids
