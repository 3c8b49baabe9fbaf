-- Appends one entry for a batch of jobs to the queue's event stream (capped near max_len entries;
-- max_len 0 turns events off). One entry per transition per script call, not per job, keeps events
-- cheap on the hot paths; readers expand `ids` (newline-separated) into one event per job.
-- max_len: the cap as the caller's argument text (a Lua number would cost Redis a float format per XADD).
-- data (optional): one more field, named `field` (default `data`: one value for every job of the
-- entry, e.g. progress); `results` and `keys` hold one line per id, in the order of `ids`.
local function emit_event(stream_key, max_len, name, ids, data, field)
  if #ids == 0 or (tonumber(max_len) or 0) <= 0 then return end
  if data then
    redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'event', name, 'ids', table.concat(ids, '\n'), field or 'data', data)
  else
    redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'event', name, 'ids', table.concat(ids, '\n'))
  end
end
