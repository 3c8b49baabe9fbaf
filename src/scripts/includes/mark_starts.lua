-- @include chunked_call
-- @include chunked_hmget
-- @include tag_key
-- Start marks (start.lua, and the marks that ride on complete.lua): a worker's processor started each
-- of these jobs, which it holds under `tokens[i]`. A job active under that token and not yet marked
-- under this lease (empty startedAt) counts the start: attempts + 1 (starts, never given back) and
-- startedAt = now. A job already marked is left as it is (a mark re-sent after a lost reply). The
-- marked jobs leave `expiring` (once started, a job never expires). Returns the ids whose lease the
-- caller no longer holds: their attempt must stop.
-- state a|(token)|(attempts)(|base|createdAt|runAt|)(startedAt)(|finishedAt|...)
local MARK_PATTERN = '^a|([^|]*)|([^|]*)(|[^|]*|[^|]*|[^|]*|)([^|]*)(|.*)$'
local function mark_starts(jobs, ids, tokens, now_s)
  local recs = chunked_hmget(jobs, ids)
  local lost, updated, marked = {}, {}, {}
  for i = 1, #ids do
    local rec = recs[i]
    local tok, attempts, mid, started, rest
    if rec then tok, attempts, mid, started, rest = string.match(rec, MARK_PATTERN) end
    if tok == nil or tok ~= tokens[i] then
      lost[#lost + 1] = ids[i]
    elseif started == '' then
      updated[#updated + 1] = ids[i]
      updated[#updated + 1] = 'a|' .. tok .. '|' .. string.format('%d', (tonumber(attempts) or 0) + 1) .. mid .. now_s .. rest
      marked[#marked + 1] = ids[i]
    end
  end
  chunked_call('HSET', jobs, updated)
  if #marked > 0 then
    local expiring = tag_key(jobs, 'expiring')
    if redis.call('EXISTS', expiring) == 1 then chunked_call('ZREM', expiring, marked) end
  end
  return lost
end

-- The ids and tokens of start marks sent as one argument, `id \n token \n id \n token ...` ('' = none).
local function parse_marks(text)
  local ids, tokens = {}, {}
  if text == '' then return ids, tokens end
  local i = 0
  for v in string.gmatch(text, '([^\n]*)\n?') do
    i = i + 1
    if i % 2 == 1 then ids[#ids + 1] = v else tokens[#tokens + 1] = v end
  end
  -- gmatch yields a last empty match at the end of the text: drop an id without a token.
  if #ids > #tokens then ids[#ids] = nil end
  return ids, tokens
end
