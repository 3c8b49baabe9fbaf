#!lua flags=allow-oom
-- step.lua: a running attempt stores the result of a durable step (job.step), so a later attempt of
-- the job returns it without running the step again. Fenced: only while the job is active under the
-- caller's token, so a worker whose lease was lost can never write step state (unlike a plain data
-- update). Steps live in the job's annex field `id .. "\1s"`, one line per step, `name \t json`
-- (json '' = undefined); a later line of the same name wins. The field is bounded: a step that would
-- take it past `maxBytes` is refused and nothing is written.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (field id .. "\1s": the steps)
-- ARGV[1] id
-- ARGV[2] token           the fencing token of the caller's attempt
-- ARGV[3] name            step name (no tab or newline: checked by the client)
-- ARGV[4] value           the step's result as JSON ('' = undefined)
-- ARGV[5] maxBytes        the most bytes the steps field of one job may hold
-- Returns: 1 stored, 0 the caller no longer holds the job, -1 over maxBytes (nothing stored)
-- @include held_record

local annex = annex_key
local id = arg_id
if not held_record(jobs_key, id, arg_token) then return 0 end
local field = id .. '\1s'
local line = arg_name .. '\t' .. arg_value
local old = redis.call('HGET', annex, field)
local size = old and #old or 0
if size + #line + 1 > tonumber(arg_max_bytes) then return -1 end
redis.call('HSET', annex, field, old and (old .. '\n' .. line) or line)
return 1
