-- Called when a field of the claims HASH was created (a new worker, claim slot or handoff record):
-- deletes up to 4 expired fields picked at random (those of workers that stopped while busy), so the
-- hash stays in proportion to the live workers without any TTL. Every field's value starts
-- `nonce|expiry|` (includes/record_claim.lua, includes/record_handoff.lua).
local function prune_claims(claims, now)
  local sample = redis.call('HRANDFIELD', claims, 4, 'WITHVALUES')
  for i = 1, #sample, 2 do
    local exp = tonumber(string.match(sample[i + 1], '^[^|]*|([^|]*)|'))
    if exp and exp < now then redis.call('HDEL', claims, sample[i]) end
  end
end
