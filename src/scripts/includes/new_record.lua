-- @include parse_record
-- @include with_header
-- @include set_field
-- @include int_text
-- The record of a job being added (add.lua, add-one.lua): `state`, created `now`, due `due` (nil:
-- none), `finished` ('' unless dead at once), the client's option `tail` (header fields 9..), then
-- `body` (its data, or the annex marker). With `ttl_ms` ('' = none) the job expires at now + ttl_ms on
-- Redis's clock. Returns the record and its expireAt (from the tail or the ttl; nil or '' = none).
-- expireAt (header field 17) in an option tail, which starts at field 8.
local NEW_RECORD_EXPIRE = '^' .. string.rep('[^|]*|', 9) .. '([^|]*)'
local function new_record(state, now, due, finished, tail, body, ttl_ms)
  local record = state .. '||0||' .. int_text(now) .. '|' .. (due and int_text(due) or '') .. '||' .. finished .. '|' .. tail .. '\n' .. body
  local expire_at = string.match(tail, NEW_RECORD_EXPIRE)
  if ttl_ms ~= '' then
    expire_at = int_text(now + tonumber(ttl_ms))
    local f, nl = parse_record(record)
    set_field(f, F_EXPIRE, expire_at)
    record = with_header(f, record, nl)
  end
  return record, expire_at
end
