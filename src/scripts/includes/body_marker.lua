-- A payload longer than BODY_INLINE_MAX bytes is stored in the annex (field id .. '\1b') and the
-- record's data part is BODY_MARKER, which no JSON text can be. Small payloads stay inline: one hash
-- field per job is what keeps a waiting job near 225 bytes.
local BODY_INLINE_MAX = 512
local BODY_MARKER = '\1'
