-- The annex hash (key `errors`) keeps, per job: its error lines under the field `id`, its progress
-- under `id .. "\1p"`, its log lines under `id .. "\1l"`, its parents (dependsOn) under
-- `id .. "\1d"` and, for a payload over 512 bytes, the payload itself under `id .. "\1b"` (ids never
-- contain control characters), its durable step results (job.step) under `id .. "\1s"`, its parents in
-- other queues under `id .. "\1x"` and those of them it still waits for under `id .. "\1y"`, signals
-- sent to it and not consumed yet under `id .. "\1g"`, the signal it is parked for under `id .. "\1w"`,
-- the children job.addChildren added under `id .. "\1c"` and their ends under `id .. "\1k"`, and the
-- parent that added it (job.addChildren: `parent queue \t parent id`) under `id .. "\1u"`.
-- Returns every annex field of the given ids, for one HDEL.
local function annex_fields(ids)
  local fields = {}
  for i = 1, #ids do
    fields[#fields + 1] = ids[i]
    fields[#fields + 1] = ids[i] .. '\1p'
    fields[#fields + 1] = ids[i] .. '\1l'
    fields[#fields + 1] = ids[i] .. '\1d'
    fields[#fields + 1] = ids[i] .. '\1b'
    fields[#fields + 1] = ids[i] .. '\1s'
    fields[#fields + 1] = ids[i] .. '\1x'
    fields[#fields + 1] = ids[i] .. '\1y'
    fields[#fields + 1] = ids[i] .. '\1g'
    fields[#fields + 1] = ids[i] .. '\1w'
    fields[#fields + 1] = ids[i] .. '\1c'
    fields[#fields + 1] = ids[i] .. '\1k'
    fields[#fields + 1] = ids[i] .. '\1u'
  end
  return fields
end
