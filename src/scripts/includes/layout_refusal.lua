-- The refusal of an add whose caller counts `partitions` partitions when the queue records another
-- count, or was moved by a repartition (meta `partitions`, `moved`): a client with a stale layout
-- would add jobs no worker claims. Returns the error reply to return, or nil when the layout agrees.
local function layout_refusal(meta, partitions)
  -- Most queues have no meta hash at all (no pause, limits or partitions recorded): an integer reply
  -- costs Redis about a quarter of HMGET's table (issue 17: the add is the interactive path).
  if redis.call('EXISTS', meta) == 0 then return nil end
  local layout = redis.call('HMGET', meta, 'partitions', 'moved')
  if layout[2] then return redis.error_reply('SURETY_PARTITIONS ' .. layout[2]) end
  if layout[1] and layout[1] ~= partitions then return redis.error_reply('SURETY_PARTITIONS ' .. layout[1]) end
  return nil
end
