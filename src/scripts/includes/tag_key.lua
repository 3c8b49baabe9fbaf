-- The key `name` of the queue whose `jobs` key (any of its keys, `{tag}:...`) is given, named as
-- src/store/keys.ts names it. For keys a hot script needs only on a rare path (expiry in claim and begin):
-- they share the queue's hash tag, so its cluster slot, and are not passed in KEYS, because every key
-- of an EVALSHA costs on each call (parsing, ACL and slot checks) even when the script never uses it.
local function tag_key(queue_key, name)
  return string.match(queue_key, '^({[^}]*}:)') .. name
end
