-- @include group_keys
-- @include record_group
-- Needs group_keys and record_group. Job `id` (record `rec`) finished or was removed: free the dedupe
-- key it holds until then (throttle without ttl, debounce), if it still holds it.
local function release_dedupe(queue_key, id, rec)
  local d = record_dedupe(rec)
  if not d then return end
  local key = group_keys(queue_key).dedupe .. d
  if redis.call('GET', key) == id then redis.call('DEL', key) end
end
