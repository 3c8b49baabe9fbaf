-- Appends `new` (log lines, each a JSON string: no raw newline) to job `id`'s log in the annex (field
-- id .. "\1l", newline-separated, oldest first), keeping the last `max` lines. Returns how many lines
-- the log holds now. Used by a running attempt's job.log (progress.lua) and by queue.addJobLog
-- (add-log.lua): one storage, one limit.
local function append_log(annex, id, new, max)
  local field = id .. '\1l'
  local lines = {}
  local old = redis.call('HGET', annex, field)
  if old then
    for line in string.gmatch(old, '[^\n]+') do lines[#lines + 1] = line end
  end
  for i = 1, #new do lines[#lines + 1] = new[i] end
  local first = math.max(1, #lines - max + 1)
  redis.call('HSET', annex, field, table.concat(lines, '\n', first))
  return #lines - first + 1
end
