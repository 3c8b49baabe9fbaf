-- Takes blocked job `child` off the `dependents` list of every parent it was added with (its annex
-- field `child .. "\1d"`), so that no parent can later release or fail another job that reuses the
-- id. Called when a blocked job leaves the blocked state other than by its last parent's release:
-- removed, cancelled, or failed by one dead parent while others are still running. `k` holds the
-- key names errors (the annex) and dependents.
local function unlink_parents(k, child)
  local parents = redis.call('HGET', k.annex, child .. '\1d')
  if not parents then return end
  for parent in string.gmatch(parents, '[^\n]+') do
    local list = redis.call('HGET', k.dependents, parent)
    if list then
      local kept = {}
      for c in string.gmatch(list, '[^\n]+') do
        if c ~= child then kept[#kept + 1] = c end
      end
      if #kept == 0 then
        redis.call('HDEL', k.dependents, parent)
      else
        redis.call('HSET', k.dependents, parent, table.concat(kept, '\n'))
      end
    end
  end
end
