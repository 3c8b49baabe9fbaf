-- @include new_record
-- @include set_field
-- @include with_header
-- @include parse_record
-- @include body_marker
-- Writes a job brought from another system (the migration from BullMQ) under its own id, which the
-- caller has checked is free: in state `j.state` ('w' waiting, at the back of its priority or at the
-- front for a lifo job; 'd' delayed until `j.due`; 'x' dead since `j.finished`), created `j.created`,
-- with `j.attempts` starts already charged to its budget, and its error lines, log lines and progress
-- ('' = none) in the annex. Generated ids stay clear of the imported ones: the id counter is raised to
-- `j.id_floor` (the source's own counter; '' = leave it). Only the record: place_imported puts it where
-- workers find it (at once on one server; after the take across servers, import-release.lua).
local function write_imported(k, j, now)
  local data = j.data
  if #data > BODY_INLINE_MAX then
    redis.call('HSET', k.annex, j.id .. '\1b', data)
    data = BODY_MARKER
  end
  local state, due = j.state, tonumber(j.due)
  -- A delayed job already due when it arrives waits at once (as a promotion would make it).
  if state == 'd' and (due == nil or due <= now) then state = 'w' end
  local record = new_record(state, tonumber(j.created), state == 'd' and due or nil, j.finished, j.tail, data, '')
  local f, nl = parse_record(record)
  if tonumber(j.attempts) > 0 then
    set_field(f, F_ATTEMPTS, j.attempts)
    record = with_header(f, record, nl)
  end
  redis.call('HSET', k.jobs, j.id, record)
  if state == 'x' and j.finished == '' then error('write_imported: a dead job needs its finish time') end
  if j.errors ~= '' then redis.call('HSET', k.annex, j.id, j.errors) end
  if j.logs ~= '' then redis.call('HSET', k.annex, j.id .. '\1l', j.logs) end
  if j.progress ~= '' then redis.call('HSET', k.annex, j.id .. '\1p', j.progress) end
  if j.id_floor ~= '' and tonumber(redis.call('GET', k.ids) or '0') < tonumber(j.id_floor) then
    redis.call('SET', k.ids, j.id_floor)
  end
end
