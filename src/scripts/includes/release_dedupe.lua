-- @include group_keys
-- @include record_group
-- @include dedupe_successor
-- @include tag_key
-- Needs group_keys and record_group. Job `id` (record `rec`) finished or was removed: free the dedupe
-- key it holds (its record names the key), if it still holds it. A key with a ttl (a throttle window)
-- outlives its job, unless `withdrawn`: the job was removed, drained or cancelled before it ever
-- started, so the window it opened is given back and the next add makes a new job (instead of
-- answering for a job that never ran). Records of earlier versions name only keys without a ttl.
-- keepLastIfActive: a pending successor blocked behind the job (includes/dedupe_successor.lua) takes
-- the key instead (the same script's settle_dependents releases it), so adds from now on rewrite it
-- or queue behind it. A successor that leaves before its holder ended (removed, cancelled, expired)
-- drops its name, and the holder keeps the key.
local function release_dedupe(queue_key, id, rec, withdrawn)
  local d = record_dedupe(rec)
  if not d then return end
  local key = group_keys(queue_key).dedupe .. d
  local holder = redis.call('GET', key)
  if holder ~= id then
    if holder and redis.call('GET', tag_key(queue_key, 'dn:' .. d)) == id then
      redis.call('DEL', tag_key(queue_key, 'dn:' .. d))
    end
    return
  end
  local successor = dedupe_successor(queue_key, d, id)
  if successor then
    redis.call('DEL', tag_key(queue_key, 'dn:' .. d))
    redis.call('SET', key, successor)
    return
  end
  if withdrawn or redis.call('PTTL', key) < 0 then redis.call('DEL', key) end
end
