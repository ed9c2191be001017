--[[
  Expires what is due in one room, at most a batch of members per call: connections past the
  presence window, typing marks past the typing window, leave graces that ended. Publishes one
  'leave' (reason expired, or the reason the grace was started with) per member who thereby left
  and one 'typing-stop' per expired mark, then rewrites the room's due entry with its exact next
  deadline (or drops it with the emptied room). Concurrent calls never announce an expiry twice:
  each member is settled atomically, and a room that is not due costs one ZSCORE.
  A room of up to INDEX_FROM members is read whole; a bigger one through its index, whose entries
  are lower bounds: a member found not expired gets its exact deadline back.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] batch: most members to expire in this call

  Reply: {connections dropped, leaves, typing stops, 1 if more is due now else 0}
]]
-- @include "replay"
-- @include "presence"
local batch = tonumber(ARGV[5])
local dueAt = rcall('ZSCORE', dueKey, room)
if not dueAt or tonumber(dueAt) > now then
  return { 0, 0, 0, 0 }
end

local dropped, leaves, stops, expired = 0, 0, 0, 0
local function expireCounted(user, rec)
  local live, d, l, s = expire(user, rec)
  dropped, leaves, stops, expired = dropped + d, leaves + l, stops + s, expired + 1
  return live
end

-- The earliest deadline of a room without an index, expiring up to the batch on the way.
local function scanRoom()
  local users, raws = readMembers()
  local earliest
  for i, user in ipairs(users) do
    local at = packedDeadline(raws[i])
    if at <= now and expired < batch then
      local rec = expireCounted(user, decode(raws[i]))
      at = rec and deadline(rec)
    end
    if at and (not earliest or at < earliest) then
      earliest = at
    end
  end
  return earliest
end

local earliest
if indexed() then
  for _, user in ipairs(rcall('ZRANGE', indexKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch)) do
    local rec = load(user)
    if rec and deadline(rec) <= now then
      rec = expireCounted(user, rec)
    end
    if rec then
      -- XX: an index dropped meanwhile (the room shrank) must not come back with one entry.
      rcall('ZADD', indexKey, 'XX', deadline(rec), user)
    else
      rcall('ZREM', indexKey, user)
    end
  end
  if indexed() then
    earliest = tonumber(rcall('ZRANGE', indexKey, 0, 0, 'WITHSCORES')[2])
  end
end
if not earliest and rcall('EXISTS', roomKey) == 1 then
  earliest = scanRoom()
end

local more = 0
if earliest then
  rcall('ZADD', dueKey, earliest, room)
  more = earliest <= now and 1 or 0
else
  dropRoom()
end
local reply = { dropped, leaves, stops, more }
if expired > 0 then
  remember(reply)
end
return reply
