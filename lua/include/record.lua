--[[
  The member record: one field of the room hash per user, packed so that a steady heartbeat
  patches six bytes in place instead of decoding and encoding it.
    >I6 joinedAt ms | B flags: bits 0-6 connections n (0..64), bit 7 typing | >I6 typedAt if typing
    | n x (B id length, id, >I6 last heartbeat ms) | if n is 0: >I6 end of the leave grace,
    B reason (1 explicit, 2 expired) | state JSON: the rest ('' = none)
  A record without connections is a member in its leave grace: still announced as present, its
  leave is published when the grace ends, and not at all if a connection comes back first.
  Connection ids arrive as at most 9 bytes (longer ids are sent as a digest).
]]
-- @include "room"
-- @include "packing"
-- Rooms above INDEX_FROM members keep an index of deadlines; it goes at INDEX_UNTIL (hysteresis).
local INDEX_FROM, INDEX_UNTIL = 128, 64

-- Members in the room: every field but ''.
local function memberCount()
  local n = rcall('HLEN', roomKey)
  return n > 0 and n - 1 or 0
end

local function indexed()
  return rcall('EXISTS', indexKey) == 1
end

local GRACE_REASONS = { 'explicit', 'expired', explicit = 1, expired = 2 }

-- {j = joinedAt, t = typedAt or nil, ids = {...}, beats = {...}, g = grace end or nil,
--  r = grace reason, s = state or ''}
local function decode(raw)
  local j, flags = sunpack('>I6B', raw)
  local rec, pos = { j = j, ids = {}, beats = {} }, 8
  if flags >= TYPING then
    rec.t = sunpack('>I6', raw, pos)
    flags, pos = flags - TYPING, pos + 6
  end
  for i = 1, flags do
    local len = sbyte(raw, pos)
    rec.ids[i] = ssub(raw, pos + 1, pos + len)
    rec.beats[i] = sunpack('>I6', raw, pos + 1 + len)
    pos = pos + 7 + len
  end
  if flags == 0 then
    local g, r = sunpack('>I6B', raw, pos)
    rec.g, rec.r, pos = g, GRACE_REASONS[r], pos + 7
  end
  rec.s = ssub(raw, pos)
  return rec
end

local function encode(rec)
  local n = #rec.ids
  local parts = { spack('>I6B', rec.j, n + (rec.t and TYPING or 0)) }
  if rec.t then
    parts[2] = spack('>I6', rec.t)
  end
  for i = 1, n do
    local id = rec.ids[i]
    parts[#parts + 1] = schar(#id) .. id .. spack('>I6', rec.beats[i])
  end
  if n == 0 then
    parts[#parts + 1] = spack('>I6B', rec.g, GRACE_REASONS[rec.r])
  end
  parts[#parts + 1] = rec.s
  return table.concat(parts)
end

local function load(user)
  local raw = rcall('HGET', roomKey, user)
  return raw and decode(raw)
end

-- When something in the record next expires: its oldest connection, or its typing mark.
local function deadline(rec)
  if rec.g then
    return rec.g
  end
  local oldest = rec.beats[1]
  for i = 2, #rec.beats do
    if rec.beats[i] < oldest then
      oldest = rec.beats[i]
    end
  end
  local at = oldest + presenceWindow
  if rec.t and rec.t + typingWindow < at then
    at = rec.t + typingWindow
  end
  return at
end

-- The same deadline, read straight from a packed record: a sweep weighs every record of a room
-- and decodes only those it expires.
local function packedDeadline(raw)
  local flags, pos, at = sbyte(raw, 7), 8, nil
  if flags >= TYPING then
    at = sunpack('>I6', raw, 8) + typingWindow
    flags, pos = flags - TYPING, 14
  end
  for _ = 1, flags do
    local len = sbyte(raw, pos)
    local d = sunpack('>I6', raw, pos + 1 + len) + presenceWindow
    if not at or d < at then
      at = d
    end
    pos = pos + 7 + len
  end
  return at or sunpack('>I6', raw, pos)
end

local function lastSeen(rec)
  local seen = 0
  for i = 1, #rec.beats do
    if rec.beats[i] > seen then
      seen = rec.beats[i]
    end
  end
  return seen
end
