-- The group keys of the queue that `queue_key` (any of its keys, `{tag}:...`) belongs to, named as src/store/keys.ts
-- names them (QueueKeys.group*, groupKeys). Groups are open-ended, so a script cannot list their keys
-- in KEYS; every name carries the queue's hash tag, so all of them live in the queue's cluster slot.
-- The table is built once per script run.
local GROUP_KEYS = nil -- @per-call (a Redis Functions library resets it on each call)
local function group_keys(queue_key)
  if not GROUP_KEYS then
    local base = string.match(queue_key, '^({[^}]*}:)')
    GROUP_KEYS = {
      ready = base .. 'gready', parked = base .. 'gparked', held = base .. 'gheld', active = base .. 'gactive',
      backlog = base .. 'gbacklog', limits = base .. 'glimits', turn = base .. 'gturn',
      waiting = base .. 'gwaiting', meta = base .. 'meta', group = base .. 'g:', dedupe = base .. 'dd:',
    }
  end
  return GROUP_KEYS
end
