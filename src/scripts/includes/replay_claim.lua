-- @include body_marker
-- A worker that lost the reply of a claim (the connection dropped after the claim ran) sends it again
-- with the same claimer and nonce, marked as a retry (`r<nonce>`): a first send never looks, so a claim
-- costs no read of its record. If that claim is the one recorded for the claimer (record_claim),
-- this returns its jobs that are still active under the leases it gave them, with their payloads, in
-- claim.lua's reply shape, and claims nothing new. Returns nil when the recorded claim is another one:
-- the claim being retried never ran, so the caller claims afresh.
-- A job is still under its claim's lease when its record is active (`a|`) with the very token the
-- claim gave it: the claim's jobs took consecutive lease ids from the recorded first token, at one
-- time. A record of handoffs (includes/record_handoff.lua) has no claim token: each line is
-- `<token> <id>`, that job's own handoff. A later lease of the job has a later lease id even within the
-- same millisecond (a job failed and claimed again at once). A handoff record of the previous version
-- (field `<fetcher>.h`) holds `<time> <id>` lines and matches a token ending in that time.
local function replay_claim(jobs, annex, claims, claimer, nonce, now)
  if string.byte(nonce, 1) ~= 114 then return nil end -- 'r': only a retry can match a record
  nonce = string.sub(nonce, 2)
  local rec = redis.call('HGET', claims, claimer)
  if not rec then return nil end
  local n, _, at, list = string.match(rec, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
  if n ~= nonce then return nil end
  local ids, tokens = {}, {}
  local first, at_time = string.match(at, '^(%d+)%.(.*)$')
  first = tonumber(first)
  for line in string.gmatch(list, '[^\n]+') do
    local n = #ids + 1
    if at == '' then
      tokens[n], ids[n] = string.match(line, '^([^ ]*) (.*)$')
    else
      ids[n], tokens[n] = line, string.format('%d', first + n - 1) .. '.' .. at_time
    end
  end
  local out, marked = { now, '', 0, 0, 0, 0 }, {}
  -- HMGET in chunks: unpack has a limit near 8 000 values.
  for c = 1, #ids, 1000 do
    local chunk = {}
    for i = c, math.min(c + 999, #ids) do chunk[#chunk + 1] = ids[i] end
    local recs = redis.call('HMGET', jobs, unpack(chunk))
    for i = 1, #chunk do
      local r = recs[i]
      local token = r and string.match(r, '^a|([^|]*)|')
      local want = tokens[c + i - 1]
      if token and (token == want or (not string.find(want, '.', 1, true) and string.sub(token, -#want - 1) == '.' .. want)) then
        out[#out + 1] = chunk[i]
        out[#out + 1] = r
        if string.byte(r, -1) == string.byte(BODY_MARKER) and string.byte(r, -2) == 10 then marked[#marked + 1] = #out end
      end
    end
  end
  -- Payloads that live in the annex, put in place as claim.lua does.
  for c = 1, #marked, 1000 do
    local fields = {}
    for m = c, math.min(c + 999, #marked) do fields[#fields + 1] = out[marked[m] - 1] .. '\1b' end
    local bodies = redis.call('HMGET', annex, unpack(fields))
    for k = 1, #fields do
      local j = marked[c + k - 1]
      out[j] = string.sub(out[j], 1, -2) .. (bodies[k] or 'null')
    end
  end
  return out
end
