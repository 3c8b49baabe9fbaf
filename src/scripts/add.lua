#!lua
-- add.lua: add one or many jobs (-> waiting, or -> delayed when due later, or -> blocked while it
-- waits for parent jobs to complete). Idempotent by id: an id that exists (or repeats within the call)
-- is reported with its state and nothing is written for it. Generated ids are the counter's next
-- numbers, in order, skipping every number that is already a job's id or that this call names as an
-- explicit id (before or after the item). A job whose parent is already dead is added dead (unless it
-- ignores dependency failures). Every refusal (unknown parent, stale layout) comes before any write,
-- so a refused call writes nothing. Any number of jobs per call: multi-value commands go in chunks of
-- at most 1000 values (Lua's unpack limit is near 8000).
-- KEYS[1] jobs          HASH id -> record
-- KEYS[2] waiting       LIST
-- KEYS[3] prio          ZSET
-- KEYS[4] seq           STRING
-- KEYS[5] delayed       ZSET
-- KEYS[6] ids           STRING
-- KEYS[7] events        STREAM lifecycle events
-- KEYS[8] annex         HASH annex: error lines, progress, logs, parents
-- KEYS[9] dead          ZSET
-- KEYS[10] deps         HASH blocked child -> `remaining parents|i or s`
-- KEYS[11] dependents   HASH parent -> its blocked children, newline-separated
-- KEYS[12] meta         HASH queue settings: `partitions` (on the unpartitioned tag), `moved`
-- KEYS[13] expiring     ZSET unstarted jobs with an expiry, by expireAt (see expire.lua)
-- ARGV[1] now           epoch ms, '' = Redis TIME
-- ARGV[2] wakeChannel   shard channel for idle workers
-- ARGV[3] eventsMaxLen  event stream cap (0 = no events)
-- ARGV[4] partitions    the caller's partition count (refused if the queue records another)
-- ARGV[5] idSuffix      appended to generated ids ('@<partition>' in a partitioned queue, else '')
-- ARGV[6] checkOnly     '1' = only run the checks (parents, layout) and write nothing, else ''
-- ARGV[7] batch         batch id ('' = none): the new jobs of the call are its members (queue.addBatch)
-- ARGV[8] cbId          its callback job's id ('' = generated when the batch finishes)
-- ARGV[9] cbPriority    the callback's priority (integer)
-- ARGV[10] cbDelayMs    the callback's delay after the batch finishes ('' = none)
-- ARGV[11] cbRunAt      the callback's due time (epoch ms, '' = none)
-- ARGV[12] cbTail       the callback's option tail ('' = no callback)
-- ARGV[13] cbData       the callback's user data (JSON, '' = undefined)
-- ARGV[14] outboxMarks  '' or one line per job of the call (the outbox relay, src/postgres/): its mark,
--                       `<outbox row id>:<job id>`, kept in `outboxed` (below)
-- ARGV[15] outboxForget marks to delete from `outboxed`, newline-separated (rows whose delete the relay
--                       has committed since its last call to this tag), '' = none
-- ARGV[16..] repeated: id, priority, delayMs, runAt, optionTail, data, dependsOn, depMode, group, dedupeKey, dedupeMode, dedupeTtlMs, ttlMs, xDependsOn, waiter
--   id ('' = generate), priority (integer), delayMs ('' = none), runAt (epoch ms, '' = none),
--   optionTail (header fields 9.. in Lua numbering, see job-record.ts), data (JSON),
--   dependsOn (parent ids, newline-separated, '' = none), depMode ('i' = run even if a parent dies, else 's'),
--   group ('' = none: the job waits in its group's list, includes/enqueue.lua),
--   dedupeKey ('' = none), dedupeMode ('t' throttle, 'd' debounce, 'k' debounce with keepLastIfActive),
--   dedupeTtlMs ('' = until the job finishes),
--   ttlMs ('' = none): the job expires at now + ttlMs on Redis's clock (header field F_EXPIRE); an
--   expireAt given instead comes in the option tail. A job with an expiry that is not dead at once is
--   indexed in `expiring`. A debounced rewrite takes the new add's expiry (or none).
-- waiter ('' = none): the job is a child of job.addChildren, `parent tag \t parent id \t parent queue \t
--   parent createdAt \t this queue` (createdAt: a later parent of the same id is another parent),
--   kept in `waiters` (named from the hash tag) with the job, so its end tells the parent
--   (settle_dependents). A child of that parent that ended already (a tombstone in `waiters`: a
--   replayed addChildren) is not created again, even after retention deleted it: it answers as an
--   existing job in its end state. A job of that id that exists without a parent becomes the child
--   (an end already reached goes to the parent through `wnotify`).
--   error `SURETY_CHILD_TAKEN <id>` when job `id` is a child of another parent (nothing is written).
-- A job whose option tail says lifo (header field 22, includes/tail_lifo.lua) goes to the front of its
--   priority, or of its group's line, instead of the back.
--   xDependsOn (parents in other queues, '' = none): lines `state \t tag \t queue \t partition \t id`,
--   each parent's state letter as the caller read it in its queue just before (src/queue/cross-queue.ts)
--   and its queue's hash tag; partition '' in a queue of one. A completed one counts as done, a dead one
--   fails the job (unless ignored), any other is counted in `deps` like a parent of this queue, kept in
--   the annex as pending (`id\1y`: a first line `#n`, this child's link number from the queue's
--   `xlinkseq` counter, then lines `queue \t partition \t id`) and listed in `xlinks` (named from
--   the hash tag: ZSET `id \t tag \t queue \t partition \t parent id` -> time), which the caller (or
--   the recovery pass, after a crash) turns into a link in the parent's queue (cross-link.lua). Every
--   such parent stays in the annex (`id\1x`, same lines) for job.parentResults.
-- Dedupe: the key `{tag}:dd:<dedupeKey>` holds the id of the job that took it. Throttle: while that
--   job exists unfinished (or, with a ttl, until the key expires) an add returns it and writes nothing.
--   Debounce: while that job is waiting or delayed and has never started, an add rewrites it in place
--   (same id, new data and options, new due time); once it has started (attempts > 0 or a startedAt:
--   also a retry, a snoozed job or one in job.sleep, whose steps must survive), the add creates a new
--   job that takes the key.
--   Debounce with keepLastIfActive ('k'): while the key's job is active, or has started and not
--   finished, the add does not start a job beside it: it creates (or, when one is pending, rewrites in
--   place) the key's one successor, blocked behind that job as a dependency that runs whatever the
--   job's end, named by `{tag}:dn:<key>` (includes/dedupe_successor.lua); the key stays with the
--   running job, and passes to the successor when that job ends (release_dedupe).
--   Jobs with a dedupe key are written at once (not batched), so later items of the call see them.
-- Outbox marks: `outboxed` (HASH mark -> when written, named from the hash tag) holds the mark of each
--   job a relay added or found, until the relay's commit deletes its outbox row (then the relay's next
--   call forgets it). A job whose mark is there but whose id is gone (it ran and was deleted, or was
--   removed, while that relay died before its commit) answers as existing, state letter `g`, and is
--   not created again: the retried row is a repeat of an add that happened. Marks a relay never
--   forgot (it died after its commit) go after 7 days: each call with marks looks at about 100 fields
--   (HSCAN, its cursor in the field `~`, which no mark is).
-- Events: `added` (the jobs created), `duplicated` (items whose id existed, or came earlier in the
--   call), `deduplicated` (items a dedupe key took: throttled, or debounced into the pending job;
--   with `keys`, one dedupe key per id).
-- Returns: { id, isNew (1|0), state letter, ... } per job, in order ({} with checkOnly); a debounced
--   add answers the rewritten job with isNew 0;
--   error `SURETY_UNKNOWN_PARENT <id>` when a parent neither exists nor is added earlier in the call;
--   error `SURETY_BATCH_EXISTS <id>` when the batch exists already (nothing is written);
--   error `SURETY_PARTITIONS <n>` when this tag belongs to a queue of n partitions (or was moved to n
--   by a migration): the caller's layout is stale, and nothing is written
-- @include current_time
-- @include parse_record
-- @include with_header
-- @include set_field
-- @include enqueue
-- @include announce_delayed
-- @include emit_event
-- @include body_marker
-- @include record_group
-- @include unlink
-- @include annex_fields
-- @include batch_settle
-- @include new_record
-- @include layout_refusal
-- @include record_started
-- @include dedupe_successor
-- @include tag_key
-- @include tail_lifo
-- @include waiter_ended

local jobs, waiting, prio, seq, delayed, ids_key = jobs_key, waiting_key, prio_key, seq_key, delayed_key, ids_key
local annex, dead, deps, dependents = annex_key, dead_key, deps_key, dependents_key
local now = current_time(arg_now)
local FIXED, R, CHUNK = 15, 15, 1000
local MARK_KEEP_MS = 7 * 24 * 3600 * 1000
local suffix = arg_id_suffix

-- Runs `cmd key values...` in chunks of at most CHUNK values (`step` keeps pairs together); returns
-- the reply of each chunk.
local function chunked(cmd, key, values, step)
  local replies = {}
  local size = CHUNK - CHUNK % (step or 1)
  for from = 1, #values, size do
    replies[#replies + 1] = redis.call(cmd, key, unpack(values, from, math.min(from + size - 1, #values)))
  end
  return replies
end

-- A client configured with another partition count would add jobs no worker ever claims.
local refusal = layout_refusal(meta_key, arg_partitions)
if refusal then return refusal end
local n = (#ARGV - FIXED) / R
local batch = arg_batch
local batch_hash = batch ~= '' and string.match(jobs, '^({[^}]*}:)') .. 'b:' .. batch
if batch_hash and redis.call('EXISTS', batch_hash) == 1 then return redis.error_reply('SURETY_BATCH_EXISTS ' .. batch) end

-- Checks, before any write: parents must exist already or be added (by id) earlier in this call.
local parent_state = {}
local explicit = {}
for i = 0, n - 1 do
  local list = ARGV[FIXED + 7 + i * R]
  if list ~= '' then
    for parent in string.gmatch(list, '[^\n]+') do
      if parent_state[parent] == nil then
        local rec = redis.call('HGET', jobs, parent)
        parent_state[parent] = rec and string.sub(rec, 1, 1) or false
      end
      if not parent_state[parent] and not explicit[parent] then
        return redis.error_reply('SURETY_UNKNOWN_PARENT ' .. parent)
      end
    end
  end
  local id = ARGV[FIXED + 1 + i * R]
  if id ~= '' then explicit[id] = true end
  local waiter = ARGV[FIXED + 15 + i * R]
  if waiter ~= '' then
    local w = redis.call('HGET', tag_key(jobs, 'waiters'), id)
    if w and string.sub(w, 1, #waiter) ~= waiter then return redis.error_reply('SURETY_CHILD_TAKEN ' .. id) end
  end
end
if arg_check_only == '1' then return {} end
local waiters_key = tag_key(jobs, 'waiters')

-- Generated ids: the counter's next numbers in order, skipping numbers already used as ids (in Redis,
-- or explicitly anywhere in this call), checked CHUNK candidates per HMGET.
local ids, gen = {}, {}
for i = 1, n do
  local id = ARGV[FIXED + 1 + (i - 1) * R]
  ids[i] = id
  if id == '' then gen[#gen + 1] = i end
end
if #gen > 0 then
  local start = tonumber(redis.call('GET', ids_key) or '0')
  local counter, g = start, 1
  while g <= #gen do
    local candidates = {}
    for j = 1, math.min(#gen - g + 1, CHUNK) do candidates[j] = string.format('%d', counter + j) .. suffix end
    local taken = redis.call('HMGET', jobs, unpack(candidates))
    for j = 1, #candidates do
      counter = counter + 1
      if not taken[j] and not explicit[candidates[j]] then
        ids[gen[g]] = candidates[j]
        g = g + 1
      end
    end
  end
  redis.call('INCRBY', ids_key, string.format('%d', counter - start))
end

local existing = {}
for from = 1, n, CHUNK do
  local part = redis.call('HMGET', jobs, unpack(ids, from, math.min(from + CHUNK - 1, n)))
  for j = 1, #part do existing[from + j - 1] = part[j] end
end
-- Outbox rows: a mark without its job is a job a relay added before (see the header).
local marks = {}
local outboxed = tag_key(jobs, 'outboxed')
if arg_outbox_marks ~= '' then
  for mark in string.gmatch(arg_outbox_marks, '[^\n]+') do marks[#marks + 1] = mark end
  if #marks ~= n then return redis.error_reply('SURETY_BAD_ARGS outboxMarks: ' .. #marks .. ' marks for ' .. n .. ' jobs') end
  for from = 1, n, CHUNK do
    local got = redis.call('HMGET', outboxed, unpack(marks, from, math.min(from + CHUNK - 1, n)))
    for j = 1, #got do
      local i = from + j - 1
      if got[j] and not existing[i] then existing[i] = 'g' end
    end
  end
end
local out, records, to_list, delayed_args = {}, {}, {}, {}
local seen, woken, min_due, added = {}, false, nil, {}
-- Adds that created nothing: an id that exists (`duplicated`), and adds a dedupe key took (`deduplicated`:
-- the holder's id and the key).
local duplicated, deduped_ids, deduped_keys = {}, {}, {}
local gk = group_keys(jobs)
for i = 1, n do
  local base = FIXED + 1 + (i - 1) * R
  local id = ids[i]
  local group = ARGV[base + 8] ~= '' and ARGV[base + 8] or nil
  local dedupe_key, dedupe_mode = ARGV[base + 9], ARGV[base + 10]
  local holder, holder_rec, replace, deduped = nil, nil, false, false
  -- keepLastIfActive: the running job the new (or rewritten) successor waits behind.
  local behind = nil
  if dedupe_key ~= '' and not existing[i] and not seen[id] then
    holder = redis.call('GET', gk.dedupe .. dedupe_key)
    holder_rec = holder and redis.call('HGET', jobs, holder)
    local hs = holder_rec and string.sub(holder_rec, 1, 1)
    local debounce = dedupe_mode == 'd' or dedupe_mode == 'k'
    local successor = dedupe_mode == 'k' and holder_rec and dedupe_successor(jobs, dedupe_key, holder)
    if successor then
      -- keepLastIfActive: the pending successor is rewritten in place, still behind the holder.
      replace = true
      deduped = true
      id = successor
      behind = holder
      unlink({ jobs = jobs, deps = deps }, id, 'b', nil, now)
      redis.call('ZREM', expiring_key, id)
      redis.call('HDEL', annex, unpack(annex_fields({ id })))
    elseif debounce and (hs == 'w' or hs == 'd') and not record_started(holder_rec) then
      -- Debounce: the pending job is rewritten in place under its own id.
      replace = true
      deduped = true
      id = holder
      unlink({ jobs = jobs, waiting = waiting, prio = prio, delayed = delayed }, id, hs, holder_rec, now)
      redis.call('ZREM', expiring_key, id)
      -- A new job under the old id: the old one's payload, errors, progress and logs go with it.
      redis.call('HDEL', annex, unpack(annex_fields({ id })))
    elseif dedupe_mode == 'k' and (hs == 'a' or hs == 'w' or hs == 'd') then
      -- keepLastIfActive: the key's job runs, or has started and waits for its retry: a new job
      -- waits behind it (the key stays with the running job until it ends).
      behind = holder
    elseif not debounce and holder then
      -- Throttle: a key without ttl is freed when its job ends, so one that is set means the window is
      -- open; a ttl key outlives its job (which retention may have deleted: reported as completed).
      if holder_rec then
        existing[i] = holder_rec
        id = holder
        deduped = true
      elseif redis.call('PTTL', gk.dedupe .. dedupe_key) > 0 then
        existing[i] = 'c'
        id = holder
        deduped = true
      end
    end
  end
  if deduped then
    deduped_ids[#deduped_ids + 1] = id
    deduped_keys[#deduped_ids] = dedupe_key
  end
  local waiter = ARGV[base + 14]
  if waiter ~= '' and not seen[id] then
    local w = redis.call('HGET', waiters_key, id)
    if w and #w > #waiter and not existing[i] then
      -- A child of this parent that ended (and was deleted since): not created again.
      existing[i] = string.sub(w, -1)
    elseif not w and existing[i] then
      -- A job of this id without a parent becomes the child; one that ended tells the parent now.
      local es = string.sub(existing[i], 1, 1)
      if es == 'c' or es == 'x' then
        local _, _, result = string.match(existing[i], '^([^\n]*)\n([^\n]*)\n?(.*)$')
        waiter_ended(waiters_key, id, waiter, es, es == 'c' and result or '', now)
      else
        redis.call('HSET', waiters_key, id, waiter)
      end
      local pid, pqueue = string.match(waiter, '^[^\t]*\t([^\t]*)\t([^\t]*)\t')
      redis.call('HSET', annex, id .. '\1u', pqueue .. '\t' .. pid)
    end
  end
  if existing[i] then
    if not deduped then duplicated[#duplicated + 1] = id end
    out[#out + 1] = id
    out[#out + 1] = 0
    out[#out + 1] = string.sub(existing[i], 1, 1)
  elseif seen[id] and not replace then
    duplicated[#duplicated + 1] = id
    out[#out + 1] = id
    out[#out + 1] = 0
    out[#out + 1] = seen[id]
  else
    local priority = tonumber(ARGV[base + 1])
    local due = nil
    if ARGV[base + 2] ~= '' then
      due = now + tonumber(ARGV[base + 2])
    elseif ARGV[base + 3] ~= '' then
      due = tonumber(ARGV[base + 3])
    end
    local state = 'w'
    if due ~= nil and due > now then state = 'd' end
    -- A successor is blocked until the job it waits behind ends (then waiting, or delayed until due).
    if behind then state = 'b' end
    local finished = ''
    local cross = ARGV[base + 13]
    if ARGV[base + 6] ~= '' or cross ~= '' then
      -- Dependencies: count parents not yet completed; a dead parent fails the job unless ignored.
      local ignore = ARGV[base + 7] == 'i'
      local waiting_on, failed_parent = {}, nil
      for parent in string.gmatch(ARGV[base + 6], '[^\n]+') do
        local ps = seen[parent] or parent_state[parent]
        if ps == 'x' and not ignore then
          failed_parent = failed_parent or parent
        elseif ps ~= 'c' and ps ~= 'x' then
          waiting_on[#waiting_on + 1] = parent
        end
      end
      if ARGV[base + 6] ~= '' then redis.call('HSET', annex, id .. '\1d', ARGV[base + 6]) end
      local x_refs, x_pending, x_links = {}, {}, {}
      for line in string.gmatch(cross, '[^\n]+') do
        local ps, tag, ref = string.match(line, '^(.)\t([^\t]*)\t(.*)$')
        x_refs[#x_refs + 1] = ref
        if ps == 'x' and not ignore then
          local q, _, pid = string.match(ref, '^([^\t]*)\t([^\t]*)\t(.*)$')
          failed_parent = failed_parent or (pid .. ' of queue ' .. q)
        elseif ps ~= 'c' and ps ~= 'x' then
          x_pending[#x_pending + 1] = ref
          x_links[#x_links + 1] = now
          x_links[#x_links + 1] = id .. '\t' .. tag .. '\t' .. ref
        end
      end
      if #x_refs > 0 then redis.call('HSET', annex, id .. '\1x', table.concat(x_refs, '\n')) end
      if failed_parent then
        state = 'x'
        finished = now
        redis.call('HSET', annex, id, now .. '|0|{"name":"DependencyFailedError","code":"ERR_DEPENDENCY_FAILED","message":"parent job '
          .. string.gsub(failed_parent, '[\\"]', '\\%0') .. ' is dead"}')
        redis.call('ZADD', dead, now, id)
      elseif #waiting_on + #x_pending > 0 then
        state = 'b'
        redis.call('HSET', deps, id, (#waiting_on + #x_pending) .. '|' .. (ignore and 'i' or 's'))
        if #x_pending > 0 then
          -- The child's link number: a notification of an earlier job of this id (removed and added
          -- again before its parent's end was delivered) names another one, and changes nothing.
          local n = redis.call('INCR', tag_key(jobs, 'xlinkseq'))
          redis.call('HSET', annex, id .. '\1y', '#' .. n .. '\n' .. table.concat(x_pending, '\n'))
          redis.call('ZADD', tag_key(jobs, 'xlinks'), unpack(x_links))
        end
        for _, parent in ipairs(waiting_on) do
          local old = redis.call('HGET', dependents, parent)
          redis.call('HSET', dependents, parent, old and (old .. '\n' .. id) or id)
        end
      end
    end
    local data = ARGV[base + 5]
    if #data > BODY_INLINE_MAX then
      -- A large payload lives in the annex and the record holds a marker, so the transitions that
      -- rewrite the record (claim, complete...) copy a few dozen bytes, not the payload.
      redis.call('HSET', annex, id .. '\1b', data)
      data = BODY_MARKER
    end
    local record, expire_at = new_record(state, now, due, finished, ARGV[base + 4], data, ARGV[base + 12])
    if waiter ~= '' then
      if state == 'x' then waiter_ended(waiters_key, id, waiter, 'x', '', now)
      else redis.call('HSET', waiters_key, id, waiter) end
      -- `parent id \t parent queue` in the line: kept as `parent queue \t parent id`.
      local pid, pqueue = string.match(waiter, '^[^\t]*\t([^\t]*)\t([^\t]*)\t')
      redis.call('HSET', annex, id .. '\1u', pqueue .. '\t' .. pid)
    end
    if expire_at and expire_at ~= '' and state ~= 'x' then redis.call('ZADD', expiring_key, expire_at, id) end
    local tail = ARGV[base + 4]
    local lifo = #tail > 14 and tail_lifo(tail)
    if behind then
      -- The running job's one successor (includes/dedupe_successor.lua): a dependency of it that
      -- runs whatever its end, named by the key's `dn:` string; the key stays with the running job.
      redis.call('HSET', jobs, id, record)
      redis.call('HSET', deps, id, '1|i')
      redis.call('HSET', annex, id .. '\1d', behind)
      if not replace then
        local old = redis.call('HGET', dependents, behind)
        redis.call('HSET', dependents, behind, old and (old .. '\n' .. id) or id)
        redis.call('SET', tag_key(jobs, 'dn:' .. dedupe_key), id)
      end
    elseif dedupe_key ~= '' then
      -- Written at once (see the header), with its structure, so later items of the call see it.
      redis.call('HSET', jobs, id, record)
      local ttl = ARGV[base + 11]
      if ttl ~= '' then
        redis.call('SET', gk.dedupe .. dedupe_key, id, 'PX', ttl)
      else
        redis.call('SET', gk.dedupe .. dedupe_key, id)
      end
      if state == 'd' then
        redis.call('ZADD', delayed, due, id)
        if min_due == nil or due < min_due then min_due = due end
      elseif state == 'w' then
        if enqueue(waiting, prio, seq, id, priority, lifo, group, now) then woken = true end
      end
    else
      records[#records + 1] = id
      records[#records + 1] = record
    end
    if dedupe_key ~= '' or state == 'x' or state == 'b' then
      -- Nothing to enqueue: dead at once, or released by settle_dependents when its parents finish.
    elseif state == 'd' then
      delayed_args[#delayed_args + 1] = due
      delayed_args[#delayed_args + 1] = id
      if min_due == nil or due < min_due then min_due = due end
    elseif priority == 0 and not group and not lifo then
      to_list[#to_list + 1] = id
    else
      -- Written below with the other records; enqueue only touches the list's front, the prio zset
      -- or the group here.
      if enqueue(waiting, prio, seq, id, priority, lifo, group, now) then woken = true end
    end
    seen[id] = state
    out[#out + 1] = id
    out[#out + 1] = replace and 0 or 1
    out[#out + 1] = state
    if not replace then added[#added + 1] = id end
  end
end

if #records > 0 then chunked('HSET', jobs, records, 2) end
-- Jobs due by now go first (includes/enqueue.lua; a no-op when an enqueue above promoted them).
if #to_list > 0 and promote_due(jobs, waiting, prio, seq, delayed, now, CHUNK) > 0 then woken = true end
-- The list was empty before (idle workers must be woken) when the first RPUSH left only its own ids.
if #to_list > 0 and chunked('RPUSH', waiting, to_list)[1] == math.min(#to_list, CHUNK) then woken = true end
if #delayed_args > 0 then
  chunked('ZADD', delayed, delayed_args, 2)
  announce_delayed(delayed, arg_wake_channel, min_due)
end
if woken then redis.call('SPUBLISH', arg_wake_channel, 'w') end
if #marks > 0 then
  local written = {}
  for i = 1, n do
    written[#written + 1] = marks[i]
    written[#written + 1] = now
  end
  chunked('HSET', outboxed, written, 2)
end
if arg_outbox_forget ~= '' then
  local forget = {}
  for mark in string.gmatch(arg_outbox_forget, '[^\n]+') do forget[#forget + 1] = mark end
  chunked('HDEL', outboxed, forget)
end
if #marks > 0 then
  -- Marks no relay forgot: one step of a scan that goes round the hash, so no call pays for many.
  local step = redis.call('HSCAN', outboxed, redis.call('HGET', outboxed, '~') or '0', 'COUNT', 100)
  local stale = {}
  for j = 1, #step[2], 2 do
    local field, at = step[2][j], tonumber(step[2][j + 1])
    if field ~= '~' and at and at < now - MARK_KEEP_MS then stale[#stale + 1] = field end
  end
  if #stale > 0 then redis.call('HDEL', outboxed, unpack(stale)) end
  redis.call('HSET', outboxed, '~', step[1])
end
emit_event(events_key, arg_events_max_len, 'added', added)
emit_event(events_key, arg_events_max_len, 'duplicated', duplicated)
if #deduped_ids > 0 then
  emit_event(events_key, arg_events_max_len, 'deduplicated', deduped_ids, table.concat(deduped_keys, '\n'), 'keys')
end
if batch_hash then
  -- Members: the jobs this call created (ids that existed are not). Some may be dead already.
  local dead_now, dead_count = {}, 0
  for _, id in ipairs(added) do
    if seen[id] == 'x' then
      dead_count = dead_count + 1
      if dead_count <= BATCH_DEAD_IDS_MAX then dead_now[dead_count] = id end
    end
  end
  redis.call('HSET', batch_hash, 'total', #added, 'pending', #added - dead_count, 'completed', 0, 'dead', dead_count,
    'deadIds', table.concat(dead_now, '\n'), 'createdAt', now, 'sfx', suffix, 'ev', arg_events_max_len)
  if arg_cb_tail ~= '' then
    redis.call('HSET', batch_hash, 'cbId', arg_cb_id, 'cbPriority', arg_cb_priority, 'cbDelayMs', arg_cb_delay_ms, 'cbRunAt', arg_cb_run_at,
      'cbTail', arg_cb_tail, 'cbData', arg_cb_data)
  end
  if #added == dead_count then batch_finish(jobs, batch_hash, batch, now) end
end
return out
