-- Appends one queue-wide entry (no job ids: `paused`, `resumed`, `drained`, `cleaned`) to the queue's
-- event stream, with the field/value pairs given (`...`), capped as emit_event caps it (max_len 0:
-- events off). Readers yield it as one event whose jobId is ''.
local function emit_queue_event(stream_key, max_len, name, ...)
  if (tonumber(max_len) or 0) <= 0 then return end
  redis.call('XADD', stream_key, 'MAXLEN', '~', max_len, '*', 'event', name, ...)
end
