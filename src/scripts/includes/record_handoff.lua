-- @include prune_claims
-- The jobs handed off with one registration of a fetcher (add-one.lua), for the claim that withdraws
-- it (claim.lua, includes/replay_claim.lua): field `<fetcher>.t` of the claims HASH,
-- `nonce|expiry||<token> <id>\n<token> <id>...`: a claim's record with no claim token, each job with
-- the fencing token of its own handoff (`<lease id>.<time>`), so that replay_claim finds each job
-- still under that very lease. (Each handoff's token carries its own time, as a claim's does: a
-- failover that loses the last writes rolls back the lease-id counter and the id counter, and the next
-- handoff must not give a re-used id the token a worker may still hold.)
-- handoff_record: the record's expiry and lines so far, for registration `nonce`; nil if none yet.
local function handoff_record(claims, field, nonce)
  local rec = redis.call('HGET', claims, field)
  if not rec then return nil end
  local n, expiry, lines = string.match(rec, '^([^|]*)|([^|]*)||(.*)$')
  if n ~= nonce then return nil end
  return tonumber(expiry), lines
end
-- record_handoff: adds job `id`, handed off under fencing token `token` until `deadline`, to that record
-- (prev_*: what handoff_record returned; nil starts the record, dropping an earlier registration's).
local function record_handoff(claims, field, nonce, now, token, prev_expiry, prev_lines, id, deadline)
  local expiry, lines = deadline, token .. ' ' .. id
  if prev_lines then
    expiry, lines = math.max(prev_expiry or 0, deadline), prev_lines .. '\n' .. lines
  end
  local value = nonce .. '|' .. string.format('%d', expiry) .. '||' .. lines
  if redis.call('HSET', claims, field, value) == 1 then prune_claims(claims, now) end
end
