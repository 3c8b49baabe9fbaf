-- @include prune_claims
-- Records a claim that leased jobs, for replay_claim: field `claimer` (a worker's fetcher and one of
-- its claim slots) of the claims HASH -> `nonce|expiry|first token|id\nid...`. One HSET per claim call. The
-- field is overwritten by the claimer's next claim, so a live worker holds at most one per slot.
-- `expiry` is the latest lease deadline of the claim: past it, no job of the claim can still be under
-- its lease unless the worker renewed it, which it only does after receiving the reply; a record past
-- expiry can never be replayed usefully. When a claim creates a field (a new worker, or a new slot), it
-- prunes expired fields (includes/prune_claims.lua).
-- expiry: the latest lease deadline claim.lua gave (epoch ms); out: claim.lua's reply.
local function record_claim(claims, claimer, nonce, now, out, expiry)
  if claimer == '' or #out < 8 then return end
  local ids = {}
  for j = 7, #out, 2 do ids[#ids + 1] = out[j] end
  -- The first job's token (`<lease id>.<time>`): the claim gave the next ones consecutive lease ids at
  -- the same time, and replay_claim matches each job on its exact token.
  local at = string.match(out[8], '^a|([^|]*)|')
  if string.byte(nonce, 1) == 114 then nonce = string.sub(nonce, 2) end -- a retry that claimed afresh
  local value = nonce .. '|' .. string.format('%d', expiry) .. '|' .. at .. '|' .. table.concat(ids, '\n')
  if redis.call('HSET', claims, claimer, value) == 1 then prune_claims(claims, now) end
end
