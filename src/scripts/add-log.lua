#!lua flags=allow-oom
-- add-log.lua: append a log line to a job from outside its processor (queue.addJobLog), in any state:
-- the same log a running attempt's job.log appends to (includes/append_log.lua), with the same limit
-- on the lines kept. Not fenced: no attempt owns the call.
-- KEYS[1] jobs            HASH id -> record
-- KEYS[2] annex           HASH annex: error lines, progress, logs
-- ARGV[1] id
-- ARGV[2] maxLines        log lines kept per job
-- ARGV[3] line            the line, as a JSON string
-- Returns: the number of lines the job's log holds now, or 'NOT_FOUND' when there is no such job
-- @include append_log

if redis.call('HEXISTS', jobs_key, arg_id) == 0 then return 'NOT_FOUND' end
return append_log(annex_key, arg_id, { arg_line }, tonumber(arg_max_lines))
