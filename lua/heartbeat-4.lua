--[[
  Refreshes one connection of a user in a room. If the user had no live connection, publishes
  'join' (after the overdue 'leave' of stale connections never announced, so events alternate).
  A new state, when given and different, is stored and published as 'update' (or rides the join).
  A user holds at most 64 connections per room: a new one beyond that replaces the one silent the
  longest (a client reconnecting in a loop cannot grow the record without bound).
  Refreshes the bucket keys' expiry, the safety net, as refreshTtl below explains.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] user   ARGV[8] connection
  ARGV[9] state JSON, or '' to keep the stored state

  Reply: {joined 1|0, seq of the event published or 0}
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

-- The safety net: keys live while anyone heartbeats. A heartbeat refreshes them on a join, on a new
-- connection, and when its connection's previous heartbeat lies in an earlier quarter of the TTL:
-- a connection beating at least once a presence window (at most a third of the TTL) so refreshes
-- them at least every quarter TTL plus a window, and a steady heartbeat skips the three PEXPIREs.
local function refreshTtl(previousBeat)
  local quarter = keyTtl / 4
  if previousBeat and math.floor(previousBeat / quarter) == math.floor(now / quarter) then
    return
  end
  rcall('PEXPIRE', membersKey, keyTtl)
  rcall('PEXPIRE', usersKey, keyTtl)
  rcall('PEXPIRE', dueKey, keyTtl)
end

local room, user, conn, state = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local field = fieldOf(room, user)

local rec = settle(field)
local joined = rec == nil
if joined then
  rec = { c = {}, j = now }
  local lo, hi = roomRange(room)
  if rcall('ZLEXCOUNT', membersKey, lo, hi) == 0 then
    -- A new chain of events: the room's members may have vanished unannounced with the safety-net
    -- expiry, so the join must not claim to follow its last event.
    rcall('HDEL', seqKey, room)
  end
  rcall('ZADD', membersKey, 0, field)
end
local previousBeat = rec.c[conn]
if not previousBeat then
  local count, oldest, oldestConn = 0, nil, nil
  for c, beat in pairs(rec.c) do
    count = count + 1
    if not oldest or beat < oldest then
      oldest, oldestConn = beat, c
    end
  end
  if count >= MAX_CONNECTIONS then
    rec.c[oldestConn] = nil
  end
end
rec.c[conn] = now
local changed = state ~= '' and state ~= rec.s
if changed then
  rec.s = state
end
save(field, rec)
refreshTtl(previousBeat)

if joined then
  return { 1, publish(room, user, 'join', stateFragment(rec) .. rosterFragment(room)) }
end
if changed then
  return { 0, publish(room, user, 'update', stateFragment(rec)) }
end
return { 0, 0 }
