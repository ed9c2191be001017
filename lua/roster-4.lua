--[[
  One room's members as the event stream has announced them, with the sequence number the
  snapshot is consistent with: apply events whose prev is that number, and later ones in order.
  Read-only.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] most members to return

  Reply: {seq, member count, then per member returned: user, connections, lastSeenMs,
  joinedAtMs, typedAtMs (latest startTyping) or 0, state JSON or ''}
]]
-- @include "bucket"

local room, limit = ARGV[6], tonumber(ARGV[7])
local lo, hi = roomRange(room)

local seq = rcall('HGET', seqKey, room) or rcall('HGET', seqKey, '') or 0
local fields = rcall('ZRANGEBYLEX', membersKey, lo, hi, 'LIMIT', 0, limit)
local count = #fields
if count >= limit then
  count = rcall('ZLEXCOUNT', membersKey, lo, hi)
end

local reply = { tonumber(seq), count }
local skip = #room + 2
-- A record can be missing only if an eviction policy removed the users hash: skip it.
for _, field in ipairs(fields) do
  local rec = load(field)
  if rec then
    local conns, seen = 0, 0
    for _, beat in pairs(rec.c) do
      conns = conns + 1
      if beat > seen then
        seen = beat
      end
    end
    local n = #reply
    reply[n + 1] = string.sub(field, skip)
    reply[n + 2] = conns
    reply[n + 3] = seen
    reply[n + 4] = rec.j
    reply[n + 5] = rec.t or 0
    reply[n + 6] = rec.s or ''
  end
end
return reply
