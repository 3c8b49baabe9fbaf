-- @include record_group
-- @include parse_record
-- @include with_header
-- @include chunked_call
-- @include release_dedupe
-- @include batch_settle
-- @include append_errors
-- @include trim_finished
-- @include count_stats
-- @include emit_event
-- @include settle_dependents
-- @include int_text
-- Job expiry (add options `expireAt` / `ttlMs`, record field 17: F_EXPIRE). A job that has not started
-- by its expireAt ends dead with an ExpiredError and never runs: claim.lua (a job it took) and
-- expire.lua (the sweep of `expiring`; a leased job is left to its worker) end it here. One anchored match reads the
-- field, and only records whose header is long enough to hold it pay even that.
local EXPIRE_PATTERN = '^' .. string.rep('[^|\n]*|', 17) .. '([^|\n]*)'

-- The expireAt of a record (epoch ms), or nil when it has none.
local function record_expire(rec)
  if not long_header(rec) then return nil end
  local e = string.match(rec, EXPIRE_PATTERN)
  if not e or e == '' then return nil end
  return tonumber(e)
end

-- True when the job of record `rec` must not start at `now`: it expires by then and never started
-- (attempts 0: once an attempt started, its retries are not subject to expiry).
local function is_expired(rec, now)
  local e = record_expire(rec)
  return e ~= nil and e <= now and string.match(rec, '^[^|]*|[^|]*|([^|]*)') == '0'
end

-- Ends `ids` (records `recs`, as they were) dead with an ExpiredError. The caller has already taken
-- them out of the structure they were in (waiting list, group list, delayed, deps, active) and done
-- the group bookkeeping. `k` names the keys (jobs, errors, dead, events, stats, waiting, prio, seq,
-- delayed, deps, dependents, expiring) and channels (wake, done); `o` the events cap (events_max) and
-- the dead retention (keep_count, keep_age, limit; absent: no trim here). Publishes on `done`, emits
-- `dead` (their dependents that die too included), counts them in the metrics and settles their
-- dependents. Like cancel and dependency failure, expiry follows the retention rules, not the job's
-- own `keep` (docs/job-control.md).
local function expire_jobs(k, ids, recs, now, o)
  if #ids == 0 then return end
  local updated, lines, scores = {}, {}, {}
  for i = 1, #ids do
    local id, rec = ids[i], recs[i]
    local f, nl = parse_record(rec)
    f[F_STATE] = 'x'
    f[F_TOKEN] = ''
    f[F_FINISHED] = now
    updated[#updated + 1] = id
    updated[#updated + 1] = with_header(f, rec, nl)
    lines[i] = int_text(now) .. '|' .. f[F_ATTEMPTS] .. '|{"name":"ExpiredError","code":"ERR_EXPIRED","message":"job expired at '
      .. (f[F_EXPIRE] or '') .. ' before it started"}'
    scores[#scores + 1] = int_text(now)
    scores[#scores + 1] = id
    -- It never ran: the throttle window it opened is given back, so the next add makes a new job.
    release_dedupe(k.jobs, id, rec, true)
    batch_settle(k.jobs, id, rec, false, now)
  end
  chunked_call('HSET', k.jobs, updated)
  chunked_call('ZREM', k.expiring, ids)
  append_errors(k.annex, ids, lines)
  chunked_call('ZADD', k.dead, scores)
  if o.keep_count then trim_finished(k.dead, k.jobs, k.annex, now, o.keep_count, o.keep_age, o.limit) end
  redis.call('SPUBLISH', k.done, 'x\n' .. table.concat(ids, '\n'))
  count_stats(k.stats, now, 'x', #ids)
  emit_event(k.events, o.events_max, 'dead', ids)
  emit_event(k.events, o.events_max, 'dead', (settle_dependents(k, now, {}, ids)))
end
