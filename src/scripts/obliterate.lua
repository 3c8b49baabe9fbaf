#!lua flags=allow-oom
-- obliterate.lua: delete every key of one hash tag of a queue (queue.obliterate; the client calls it
-- for each partition's tag, then the unpartitioned tag). The first call (cursor '0') refuses while
-- jobs are active, unless forced, and otherwise deletes the queue's fixed keys (below) at once; it and
-- every later call then deletes the keys a SCAN step finds under the tag: per-group lists and rate
-- windows (`g:`), dedupe keys (`dd:`), batch records (`b:`) and anything else carrying the tag. UNLINK
-- frees large values off the main thread, and each SCAN step looks at about `count` slots, so no call
-- is unbounded. Calling again after a cut-off is safe: it deletes what is left.
-- KEYS[1] jobs                 HASH id -> record
-- KEYS[2] annex                HASH annex
-- KEYS[3] waiting              LIST
-- KEYS[4] prio                 ZSET
-- KEYS[5] seq                  STRING
-- KEYS[6] tokens               STRING lease id counter
-- KEYS[7] ids                  STRING job id counter
-- KEYS[8] delayed              ZSET
-- KEYS[9] active               ZSET leases (+ the sentinel)
-- KEYS[10] completed           ZSET
-- KEYS[11] dead                ZSET
-- KEYS[12] schedules           HASH
-- KEYS[13] schedulePending     HASH
-- KEYS[14] meta                HASH settings, flags, partition count
-- KEYS[15] limiter             STRING
-- KEYS[16] claims              HASH
-- KEYS[17] workers             ZSET
-- KEYS[18] workerInfo          HASH
-- KEYS[19] deps                HASH
-- KEYS[20] dependents          HASH
-- KEYS[21] stats               HASH
-- KEYS[22] events              STREAM
-- KEYS[23] groupReady          ZSET
-- KEYS[24] groupParked         ZSET
-- KEYS[25] groupActive         HASH
-- KEYS[26] groupBacklog        ZSET
-- KEYS[27] groupLimits         HASH
-- KEYS[28] groupTurn           STRING
-- KEYS[29] groupWaiting        STRING
-- KEYS[30] queueLimiter        STRING
-- ARGV[1] cursor               SCAN cursor: '0' for the first call, then the one returned
-- ARGV[2] force                '1': delete even while jobs are active
-- ARGV[3] count                SCAN COUNT of this call
-- Returns: { next cursor ('0': done), active jobs (> 0: refused, nothing deleted) }
-- @include active_sentinel

local cursor = arg_cursor
if cursor == '0' then
  if arg_force ~= '1' then
    local active = active_count(active_key)
    if active > 0 then return { '0', active } end
  end
  redis.call('UNLINK', unpack(KEYS))
end
-- A tag holds no glob character: prefixes and queue names are letters, digits and . _ : - (validate.ts).
local tag = string.match(jobs_key, '^({[^}]*})')
local step = redis.call('SCAN', cursor, 'MATCH', tag .. '*', 'COUNT', tonumber(arg_count))
local found = step[2]
for from = 1, #found, 1000 do
  redis.call('UNLINK', unpack(found, from, math.min(from + 999, #found)))
end
return { step[1], 0 }
