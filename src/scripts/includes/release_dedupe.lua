-- @include group_keys
-- @include record_group
-- Needs group_keys and record_group. Job `id` (record `rec`) finished or was removed: free the dedupe
-- key it holds (its record names the key), if it still holds it. A key with a ttl (a throttle window)
-- outlives its job, unless `withdrawn`: the job was removed, drained or cancelled before it ever
-- started, so the window it opened is given back and the next add makes a new job (instead of
-- answering for a job that never ran). Records of earlier versions name only keys without a ttl.
local function release_dedupe(queue_key, id, rec, withdrawn)
  local d = record_dedupe(rec)
  if not d then return end
  local key = group_keys(queue_key).dedupe .. d
  if redis.call('GET', key) ~= id then return end
  if withdrawn or redis.call('PTTL', key) < 0 then redis.call('DEL', key) end
end
