-- @include tag_key
-- Dedupe with `keepLastIfActive` (add.lua, release_dedupe): an add meeting a key whose job runs (or
-- has started and not finished) becomes that job's one pending successor. The successor is a blocked
-- job behind the holder, linked as a dependency that runs whatever its parent's end (deps `1|i`,
-- dependents of the holder, its annex parents field naming the holder), so every script that ends the
-- holder releases it (settle_dependents); STRING `{tag}:dn:<key>` names it, so a later add finds and
-- rewrites it. Returns the successor's id when that key names a job still blocked behind `holder`;
-- a stale name (the job was released, removed, or waits behind another job) is deleted, and nil
-- returned. `queue_key` is any key of the queue.
local function dedupe_successor(queue_key, key, holder)
  local next_key = tag_key(queue_key, 'dn:' .. key)
  local id = redis.call('GET', next_key)
  if not id then return nil end
  local rec = redis.call('HGET', tag_key(queue_key, 'jobs'), id)
  if rec and string.sub(rec, 1, 1) == 'b' and redis.call('HGET', tag_key(queue_key, 'errors'), id .. '\1d') == holder then
    return id
  end
  redis.call('DEL', next_key)
  return nil
end
