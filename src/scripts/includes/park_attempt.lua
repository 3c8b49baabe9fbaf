-- @include parse_record
-- @include int_text
-- @include group_keys
-- @include with_header
-- @include record_group
-- @include group_leave
-- @include wake_starved
-- @include emit_event
-- The running attempt of job `id` (record `rec`, header fields `f` and `nl` from parse_record) parks
-- itself (job.waitForSignal, job.waitForChildren): it started (counted here if its start mark has not
-- arrived) and gives its budget back (base + 1; no snooze is counted); the job goes to `state` due at
-- `run_at`, leaves `active`, and frees its group's slot and the queue's concurrency; a `parked` event.
-- The caller lists it where `state` says. `k` holds jobs, active, meta, events and the wake channel.
local function park_attempt(k, id, f, rec, nl, state, run_at, now, events_max_len)
  if f[F_STARTED] == '' then
    f[F_ATTEMPTS] = (tonumber(f[F_ATTEMPTS]) or 0) + 1
    f[F_STARTED] = int_text(now)
  end
  f[F_BASE] = (tonumber(f[F_BASE]) or 0) + 1
  f[F_STATE] = state
  f[F_RUN_AT] = run_at
  redis.call('HSET', k.jobs, id, with_header(f, rec, nl))
  redis.call('ZREM', k.active, id)
  local group = record_group(rec)
  if group then group_leave(group_keys(k.jobs), group, 1, now) end
  wake_starved(k.meta, k.wake)
  emit_event(k.events, events_max_len, 'parked', { id })
end
