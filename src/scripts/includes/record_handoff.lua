-- @include prune_claims
-- The jobs handed off with one registration of a fetcher (add-one.lua), for the claim that withdraws
-- it (claim.lua, includes/replay_claim.lua): field `<fetcher>.h` of the claims HASH, in the format of a
-- claim's record, `nonce|expiry|at|id\nid...`. Every job handed off with registration `nonce` gets a
-- fencing token `<lease id>.<at>`, `at` being the time of that registration's first handoff, so that
-- replay_claim finds each of them still under its handoff's lease with the check it makes for a
-- claim's jobs. (A job is handed off only by its own add, so no other lease of it can carry that token;
-- two handoffs of one registration draw distinct lease ids.)
-- handoff_record: the record of registration `nonce` so far: at (text), expiry, ids; nil if none yet.
local function handoff_record(claims, field, nonce)
  local rec = redis.call('HGET', claims, field)
  if not rec then return nil end
  local n, expiry, at, ids = string.match(rec, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
  if n ~= nonce then return nil end
  return at, tonumber(expiry), ids
end
-- record_handoff: adds job `id`, under its lease until `deadline`, to that record (prev_*: what
-- handoff_record returned; nil starts the record, dropping an earlier registration's).
local function record_handoff(claims, field, nonce, now, at, prev_expiry, prev_ids, id, deadline)
  local expiry, ids = deadline, id
  if prev_ids then
    expiry, ids = math.max(prev_expiry or 0, deadline), prev_ids .. '\n' .. id
  end
  local value = nonce .. '|' .. string.format('%d', expiry) .. '|' .. at .. '|' .. ids
  if redis.call('HSET', claims, field, value) == 1 then prune_claims(claims, now) end
end
