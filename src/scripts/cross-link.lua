#!lua flags=allow-oom
-- cross-link.lua: in a parent's queue, link a child of another queue to the parent (dependsOn
-- `{ queue, id }`), so that the parent's end notifies it (includes/settle_dependents.lua notify_cross).
-- Idempotent: a link that exists is not added twice, so the recovery pass may send it again.
-- allow-oom: it carries on an add that was accepted (the child is written), so a full Redis must not
-- leave that child blocked.
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] xdependents   HASH parent id -> its children in other queues, lines
--                       `child tag \t child id \t parent queue \t parent partition \t link number`
--                       (the child's, from its annex `child\1y`: see cross-resolve.lua)
-- ARGV[1] parent        the parent's id
-- ARGV[2] link          the line to add (as above)
-- Returns: the parent's state letter ('c' or 'x': finished, nothing linked: the caller settles the
--   child itself), or '' when the parent does not exist (removed, or trimmed by retention)
local rec = redis.call('HGET', jobs_key, arg_parent)
if not rec then return '' end
local state = string.sub(rec, 1, 1)
if state == 'c' or state == 'x' then return state end
local list = redis.call('HGET', xdependents_key, arg_parent)
if not list then
  redis.call('HSET', xdependents_key, arg_parent, arg_link)
elseif not string.find('\n' .. list .. '\n', '\n' .. arg_link .. '\n', 1, true) then
  redis.call('HSET', xdependents_key, arg_parent, list .. '\n' .. arg_link)
end
return state
