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
  script reads and writes records through steadyBeat below, or through the module Record
  (include/codec.lua) built on these names. What a steady heartbeat runs is defined here, at the
  top level: it is the one path that must define nothing else.
]]
-- @include "bucket"
local TIME, TIME_BYTES = '>I6', 6
local FLAGS_AT = TIME_BYTES + 1
local TYPING = 128
local GRACE, GRACE_BYTES = '>I6B', TIME_BYTES + 1

-- The record with connection `conn`'s heartbeat moved to `now`, if that is all this heartbeat
-- changes; else nil. Not steady: an unknown connection, anything overdue in the record, a beat
-- that crosses into a new `quarter` of the key TTL (the keys' expiry is then refreshed), and the
-- connection's first beat since its join (it may be the join's resend: the slow path looks its
-- reply up).
-- It captures nothing: each outer local a function captures costs its every call an allocation
-- (Lua 5.1's upvalues), so it takes the call's time and settings as arguments, and spells the
-- names above as their values: TIME '>I6', FLAGS_AT 7, TYPING 128, TIME_BYTES 6.
local function steadyBeat(raw, conn, now, presenceWindow, typingWindow, quarter)
  local sbyte, ssub, sunpack = string.byte, string.sub, struct.unpack
  local pos, n = 8, sbyte(raw, 7)
  if n >= 128 then
    if sunpack('>I6', raw, pos) + typingWindow <= now then
      return nil
    end
    pos, n = pos + 6, n - 128
  end
  local beatAt, last
  for _ = 1, n do
    -- A connection: its id's length, the id, its last heartbeat.
    local at = pos + 1 + sbyte(raw, pos)
    local beat = sunpack('>I6', raw, at)
    if beat + presenceWindow <= now then
      return nil
    end
    if ssub(raw, pos + 1, at - 1) == conn then
      beatAt, last = at, beat
    end
    pos = at + 6
  end
  if not beatAt or math.floor(last / quarter) ~= math.floor(now / quarter) or last == sunpack('>I6', raw) then
    return nil
  end
  return ssub(raw, 1, beatAt - 1) .. struct.pack('>I6', now) .. ssub(raw, beatAt + 6)
end
