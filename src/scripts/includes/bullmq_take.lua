-- Takes one job out of a BullMQ queue (the migration from BullMQ, src/migrate/): when the job's hash
-- still holds exactly what the caller read (its `fields`, newline-separated, and `fingerprint`: the
-- SHA-1 of each value as `<byte length>:<value>`, in that order, src/migrate/bullmq-job.ts) and the job
-- is still in `source` (kind 'list': BullMQ's wait or legacy paused list; 'zset': prioritized,
-- delayed or failed), removes it from there and deletes its hash and log. A BullMQ worker that took
-- the job first (it is active there now) or changed it (a retry, a progress update) wins: nothing is
-- changed, and the caller reads it again on its next pass.
-- Returns 'moved', or 'changed' / 'gone' (no longer in `source`) with nothing written.
local function bullmq_take(source, kind, job_key, logs_key, id, fields_text, fingerprint)
  local fields = {}
  for f in string.gmatch(fields_text, '[^\n]+') do fields[#fields + 1] = f end
  if #fields == 0 or redis.call('HLEN', job_key) ~= #fields then return 'changed' end
  local values = redis.call('HMGET', job_key, unpack(fields))
  local parts = {}
  for i = 1, #fields do
    if not values[i] then return 'changed' end
    parts[i] = #values[i] .. ':' .. values[i]
  end
  if redis.sha1hex(table.concat(parts)) ~= fingerprint then return 'changed' end
  -- The wait list is worked from its tail (RPOPLPUSH there), where the oldest jobs are, and the
  -- migration moves the oldest first, so LREM from the tail stops after a few elements.
  local removed = kind == 'list' and redis.call('LREM', source, -1, id) or redis.call('ZREM', source, id)
  if removed == 0 then return 'gone' end
  redis.call('DEL', job_key, logs_key)
  return 'moved'
end
