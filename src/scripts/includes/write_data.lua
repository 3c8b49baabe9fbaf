-- @include body_marker
-- Replaces the data of job `id` (record `rec`) with `data` (JSON), keeping its header and any result:
-- a payload over BODY_INLINE_MAX bytes goes to the annex (field id .. "\1b") and the record keeps the
-- marker, as add.lua writes it; a small one is inlined and a payload left in the annex is deleted.
local function write_data(jobs_key, annex_key, id, rec, data)
  if #data > BODY_INLINE_MAX then
    redis.call('HSET', annex_key, id .. '\1b', data)
    data = BODY_MARKER
  else
    redis.call('HDEL', annex_key, id .. '\1b')
  end
  -- header "\n" data [ "\n" result ]: JSON and the marker hold no raw newline.
  local header_end = string.find(rec, '\n', 1, true)
  local data_end = string.find(rec, '\n', header_end + 1, true)
  local result = data_end and string.sub(rec, data_end) or ''
  redis.call('HSET', jobs_key, id, string.sub(rec, 1, header_end) .. data .. result)
end
