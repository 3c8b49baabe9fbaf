#!lua flags=allow-oom
-- read-steps.lua: a running attempt reads the step results its job's earlier attempts stored
-- (job.step), fenced as step.lua is: only while the job is active under the caller's token. An attempt
-- whose lease is gone (its job may have completed elsewhere and been deleted) learns so before any
-- step body runs, instead of finding no results and running every step again.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex (field id .. "\1s": the steps)
-- ARGV[1] id
-- ARGV[2] token           the fencing token of the caller's attempt
-- Returns: false when the caller no longer holds the job; else the steps field ('' when none)
-- @include held_record

local id = arg_id
if not held_record(jobs_key, id, arg_token) then return false end
return redis.call('HGET', annex_key, id .. '\1s') or ''
