--[[
  Members expiring and leaving, with the events that say so, and the room's index of deadlines.
]]
-- @include "room"
-- @include "record"
-- @include "events"
-- The safety net: the room's keys expire keyTtl after the last refresh (see heartbeat).
local function refreshTtl()
  rcall('PEXPIRE', roomKey, keyTtl)
  rcall('PEXPIRE', indexKey, keyTtl)
  rcall('PEXPIRE', dueKey, keyTtl)
end

local function save(user, rec)
  rcall('HSET', roomKey, user, encode(rec))
end

-- The index of a room that passed INDEX_FROM members: each member's deadline.
local function buildIndex()
  local all = rcall('HGETALL', roomKey)
  local args = {}
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      args[#args + 1] = deadline(decode(all[i + 1]))
      args[#args + 1] = all[i]
    end
  end
  rcall('ZADD', indexKey, unpack(args))
end

-- The member leaves: a typing mark never outlives presence, so it stops first. An emptied room
-- goes with its keys and due entry; its next member starts a new chain of events.
local function removeMember(user, rec, reason)
  if rec.t then
    publish(user, 'typing-stop', reasonFragment(rec.t + typingWindow <= now and 'expired' or 'left'))
  end
  rcall('HDEL', roomKey, user)
  memberLeft(user)
  local wasIndexed = indexed()
  if wasIndexed then
    rcall('ZREM', indexKey, user)
  end
  local seq = publish(user, 'leave', reasonFragment(reason) .. rosterFragment())
  local count = memberCount()
  if count == 0 then
    rcall('DEL', roomKey, indexKey)
    rcall('ZREM', dueKey, room)
  elseif wasIndexed and count <= INDEX_UNTIL then
    rcall('DEL', indexKey)
  end
  return seq
end

-- The member's last connection is gone: its leave waits for the grace (if any is set and not
-- already over by `at`), and its typing stops at once. Returns the record in its grace, or nil
-- and the seq of the leave published.
local function lastConnectionGone(user, rec, reason, at)
  if leaveGrace == 0 or at + leaveGrace <= now then
    return nil, removeMember(user, rec, reason)
  end
  if rec.t then
    publish(user, 'typing-stop', reasonFragment(rec.t + typingWindow <= now and 'expired' or 'left'))
    rec.t = nil
  end
  rec.ids, rec.beats, rec.g, rec.r = {}, {}, at + leaveGrace, reason
  save(user, rec)
  rcall('ZADD', dueKey, 'LT', rec.g, room)
  if indexed() then
    rcall('ZADD', indexKey, 'LT', rec.g, user)
  end
  return rec
end

-- Drops the record's expired connections and typing mark, publishing the overdue events. Returns
-- the record, or nil if the member thereby left, and counts: connections dropped, leaves, stops.
local function expire(user, rec)
  if rec.g then
    removeMember(user, rec, rec.r)
    return nil, 0, 1, 0
  end
  local ids, beats, dropped = {}, {}, 0
  for i = 1, #rec.ids do
    if rec.beats[i] + presenceWindow > now then
      ids[#ids + 1], beats[#beats + 1] = rec.ids[i], rec.beats[i]
    else
      dropped = dropped + 1
    end
  end
  if #ids == 0 then
    local stops = rec.t and 1 or 0
    local live = lastConnectionGone(user, rec, 'expired', lastSeen(rec) + presenceWindow)
    return live, dropped, live and 0 or 1, stops
  end
  rec.ids, rec.beats = ids, beats
  local stops = 0
  if rec.t and rec.t + typingWindow <= now then
    rec.t = nil
    publish(user, 'typing-stop', reasonFragment('expired'))
    stops = 1
  end
  save(user, rec)
  return rec, dropped, 0, stops
end

-- The member's live record, after anything overdue in it was expired and announced.
local function settle(user, rec)
  if rec and deadline(rec) <= now then
    return (expire(user, rec))
  end
  return rec
end

local function findConnection(rec, conn)
  for i = 1, #rec.ids do
    if rec.ids[i] == conn then
      return i
    end
  end
  return nil
end
