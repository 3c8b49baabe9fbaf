-- @include replay_claim
-- A fetcher's handoff registration (claim.lua; add-one.lua takes its units): a claim that leaves the
-- worker free slots registers the fetcher in `idle` for n jobs (members `<fetcher>|<nonce>|1` .. `|n`,
-- until the deadline), and the fetcher's next claim withdraws it. The worker asks for at most 100
-- units (worker/handoff.ts); MAX_UNITS bounds what a registration or a withdrawal can cost (one member
-- each, and unpack's limit near 8 000 values).
local MAX_UNITS = 1000

-- register_fetcher: registers `units` members of registration `nonce` of `fetcher` in `idle` until
-- `deadline` (a retried claim's `r<nonce>` registers under the claim's own nonce).
local function register_fetcher(idle, fetcher, nonce, units, deadline)
  local prefix = fetcher .. '|' .. string.match(nonce, '^r?(.*)$') .. '|'
  local members = {}
  for u = 1, units do
    members[#members + 1] = deadline
    members[#members + 1] = prefix .. u
  end
  redis.call('ZADD', idle, unpack(members))
end

-- withdraw_registration: removes what is left of registration `nonce` of `fetcher` (`units` members),
-- and finds the jobs handed off with it that may not have reached the fetcher (fewer arrived by
-- message, `received`, than were handed off): those still under their handoff's lease, as
-- (id, record) pairs for the end of the claim's reply (the worker keeps whichever copy comes first),
-- from the record add-one.lua keeps (`<fetcher>.t`) or the previous version's (`<fetcher>.h`, times
-- only: a rolling deploy may have producers of both). Returns the pairs and how many of them the
-- worker has not seen: the claim takes that many fewer jobs.
local function withdraw_registration(k, fetcher, nonce, units, received, now)
  units = math.min(tonumber(units) or 1, MAX_UNITS)
  local members = {}
  for u = 1, units do members[u] = fetcher .. '|' .. nonce .. '|' .. u end
  local unseen = units - redis.call('ZREM', k.idle, unpack(members)) - (tonumber(received) or 0)
  local replayed = {}
  if unseen <= 0 then return replayed, 0 end
  local r = replay_claim(k.jobs, k.annex, k.claims, fetcher .. '.t', 'r' .. nonce, now)
  local old = replay_claim(k.jobs, k.annex, k.claims, fetcher .. '.h', 'r' .. nonce, now)
  r = r or old
  if old and r ~= old then for i = 7, #old do r[#r + 1] = old[i] end end
  if not r then return replayed, 0 end
  for i = 7, #r do replayed[#replayed + 1] = r[i] end
  return replayed, math.min(unseen, #replayed / 2)
end
