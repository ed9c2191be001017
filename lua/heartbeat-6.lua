--[[
  Refreshes one connection of a user in a room. The user's first live connection publishes
  'join' (after the overdue 'leave' of connections that expired unannounced, so events
  alternate). A new state, when given and different, is stored and published as 'update' (or
  rides the join). A user holds at most 64 connections per room: a new one beyond that replaces
  the one silent the longest, so a client reconnecting in a loop cannot grow the record.
  A steady heartbeat (a known connection, nothing overdue in the record, the same state) patches
  the connection's time in place and touches nothing else: no event, no index, no due entry
  (those hold lower bounds, which a later heartbeat keeps true).

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user   ARGV[6] connection (at most 9 bytes)   ARGV[7] state JSON, or '' to keep it
  ARGV[8] capacity: most members the room may hold, or 0 for no limit. A user who is not
  present cannot join a room that holds as many (members in their leave grace count): nothing
  is written or published. A present user's other connections always get in.

  Reply: {outcome, seq of the event published or 0, its epoch or ''}, or 0 alone for a steady
  heartbeat.
]]
-- @include "replay"
-- @include "record"
local OUTCOME = outcomes('refreshed', 'joined', 'full')
local user, conn, state, capacity = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8])

-- The safety net: keys live while anyone heartbeats. A join or a new connection refreshes them,
-- and so does a heartbeat whose connection's previous one lies in an earlier quarter of the TTL;
-- a connection beating at least once a presence window (at most a third of the TTL) thus refreshes
-- them at least every quarter TTL plus a window, and a steady heartbeat skips the PEXPIREs.
local quarter = keyTtl / 4

local raw = rcall('HGET', roomKey, user)
if raw then
  -- Steady unless something in the record is overdue or this beat crosses into a new quarter.
  local pos, n, typedAt = recordHead(raw)
  local steady = not typedAt or typedAt + typingWindow > now
  local beatAt
  for _ = 1, n do
    local id, beat, at, nextPos = connectionAt(raw, pos)
    steady = steady and beat + presenceWindow > now
    if not beatAt and id == conn then
      beatAt = at
      steady = steady and math.floor(beat / quarter) == math.floor(now / quarter)
    end
    pos = nextPos
  end
  if beatAt and steady and (state == '' or state == ssub(raw, pos)) then
    rcall('HSET', roomKey, user, withBeat(raw, beatAt, now))
    -- A bare 0, not a table: Redis takes longer to reply with a table than to run this path.
    return 0
  end
end

-- Not steady: everything else is defined only now, so that a steady heartbeat never pays for it.
-- @include "presence"
-- Keeps every record, and so every script, bounded.
local MAX_CONNECTIONS = 64

local rec = expireOverdue(user, raw and decode(raw))
local joined = not rec
if joined and capacity > 0 and memberCount() >= capacity then
  return { OUTCOME.full, 0, '' }
end
if joined then
  rec = { j = now, ids = {}, beats = {}, s = '' }
  if rcall('EXISTS', roomKey) == 0 then
    -- A new chain of events: the room's members may have vanished unannounced with the safety-net
    -- expiry, so the join must not claim to follow the room's last event.
    rcall('HSET', roomKey, '', 0)
    rcall('DEL', indexKey)
  end
end
local slot = findConnection(rec, conn)
local previousBeat = slot and rec.beats[slot]
if not slot then
  slot = #rec.ids + 1
  if slot > MAX_CONNECTIONS then
    slot = 1
    for i = 2, #rec.ids do
      if rec.beats[i] < rec.beats[slot] then
        slot = i
      end
    end
  end
  rec.ids[slot] = conn
end
rec.beats[slot] = now
-- A connection back within the leave grace: the leave is called off, and nothing is published.
rec.g, rec.r = nil, nil
local changed = state ~= '' and state ~= rec.s
if changed then
  rec.s = state
end
save(user, rec)

local reply = { OUTCOME.refreshed, 0, '' }
if joined then
  listJoined(user)
  rcall('ZADD', dueKey, 'LT', now + presenceWindow, room)
  if indexed() then
    rcall('ZADD', indexKey, now + presenceWindow, user)
  elseif memberCount() > INDEX_FROM then
    buildIndex()
  end
  local seq, epoch = publish(user, 'join', stateFragment(rec.s) .. rosterFragment())
  reply = remember({ OUTCOME.joined, seq, epoch })
elseif changed then
  local seq, epoch = publish(user, 'update', stateFragment(rec.s))
  reply = remember({ OUTCOME.refreshed, seq, epoch })
end
if not previousBeat or math.floor(previousBeat / quarter) ~= math.floor(now / quarter) then
  refreshTtl()
end
return reply
