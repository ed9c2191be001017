--[[
  The member record: one field of the room hash per user, packed so that a steady heartbeat
  patches one connection's time in place instead of decoding and encoding the whole record.

    joinedAt   TIME         when the member joined
    flags      1 byte       bits 0-6: connections n (0..64); bit 7: typing
    typedAt    TIME         only while typing
    n times    1 byte id length, the id (at most 9 bytes), TIME of its last heartbeat
    graceEnd   TIME + 1 byte reason (1 explicit, 2 expired): only when n is 0, the member's
               leave grace (still announced as present; its leave is due at graceEnd)
    state      the rest: JSON, or '' for none

  TIME is 6 bytes, big-endian milliseconds. The offsets are named here and nowhere else: every
  script reads and writes records through these functions, or through the module Record
  (include/codec.lua) built on them. What a steady heartbeat runs is defined here, at the top
  level: it is the one path that must define nothing else.
]]
-- @include "bucket"
local TIME, TIME_BYTES = '>I6', 6
local FLAGS_AT = TIME_BYTES + 1
local TYPING = 128
local GRACE, GRACE_BYTES = '>I6B', TIME_BYTES + 1

-- Where the connections start, how many there are, and the typing time or nil.
local function recordHead(raw)
  local flags = sbyte(raw, FLAGS_AT)
  if flags >= TYPING then
    return FLAGS_AT + 1 + TIME_BYTES, flags - TYPING, (sunpack(TIME, raw, FLAGS_AT + 1))
  end
  return FLAGS_AT + 1, flags, nil
end

-- The connection at `pos`: its id, its last heartbeat, where that time is stored, and where the
-- next connection starts.
local function connectionAt(raw, pos)
  local len = sbyte(raw, pos)
  local beatAt = pos + 1 + len
  return ssub(raw, pos + 1, beatAt - 1), (sunpack(TIME, raw, beatAt)), beatAt, beatAt + TIME_BYTES
end

-- The record with connection `conn`'s heartbeat moved to now, if that is all this heartbeat
-- changes; else nil. Not steady: an unknown connection, anything overdue in the record, a beat
-- that crosses into a new quarter of the key TTL (the keys' expiry is then refreshed), and the
-- connection's first beat since its join (it may be the join's resend: the slow path looks its
-- reply up).
local function steadyBeat(raw, conn, quarter)
  local pos, n, typedAt = recordHead(raw)
  if typedAt and typedAt + typingWindow <= now then
    return nil
  end
  local beatAt, last
  for _ = 1, n do
    local id, beat, at, nextPos = connectionAt(raw, pos)
    if beat + presenceWindow <= now then
      return nil
    end
    if id == conn then
      beatAt, last = at, beat
    end
    pos = nextPos
  end
  if not beatAt or math.floor(last / quarter) ~= math.floor(now / quarter) or last == sunpack(TIME, raw) then
    return nil
  end
  return ssub(raw, 1, beatAt - 1) .. spack(TIME, now) .. ssub(raw, beatAt + TIME_BYTES)
end
