#!lua flags=allow-oom
-- add-children.lua: a running attempt plans the children job.addChildren adds (fenced by its lease):
-- their refs join the job's children (annex `id .. "\1c"`, lines `child queue \t child id \t i or s`,
-- i: a dead child does not fail the wait), and the call's step (`~children:<n>`, the refs as JSON)
-- stores them, in one step, so a later run adds the same children (add.lua makes that idempotent)
-- and never plans new ones. allow-oom: it only records what the caller adds next, bounded.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (fields `\1c` children, `\1s` steps)
-- ARGV[1] id
-- ARGV[2] token           the fencing token of the caller's attempt
-- ARGV[3] step            the call's step name (no tab or newline)
-- ARGV[4] value           the step's value: JSON, the children's { queue, id } in order
-- ARGV[5] children        lines `child queue \t child id \t i or s`
-- ARGV[6] maxChildren     the most children one job may have
-- ARGV[7] maxBytes        the most bytes the steps field of one job may hold
-- Returns: 1 stored, 0 the caller no longer holds the job, -1 the steps would pass maxBytes, -2 the
--   job would have more than maxChildren children (nothing stored)
-- @include held_record

local annex, id = annex_key, arg_id
if not held_record(jobs_key, id, arg_token) then return 0 end
local field = id .. '\1c'
local known = redis.call('HGET', annex, field) or ''
local count = 0
if known ~= '' then
  local _, lines = string.gsub(known, '\n', '')
  count = lines + 1
end
local added = {}
for line in string.gmatch(arg_children, '[^\n]+') do
  local ref = string.match(line, '^([^\t]*\t[^\t]*)\t')
  if not string.find('\n' .. known .. '\n', '\n' .. ref .. '\t', 1, true) then
    added[#added + 1] = line
    known = known == '' and line or (known .. '\n' .. line)
  end
end
if count + #added > tonumber(arg_max_children) then return -2 end
local steps_field = id .. '\1s'
local steps = redis.call('HGET', annex, steps_field)
local step_line = arg_step .. '\t' .. arg_value
if (steps and #steps + 1 or 0) + #step_line > tonumber(arg_max_bytes) then return -1 end
redis.call('HSET', annex, steps_field, steps and (steps .. '\n' .. step_line) or step_line)
if #added > 0 then redis.call('HSET', annex, field, known) end
return 1
