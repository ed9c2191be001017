--[[
  Members joining, expiring and leaving, with the events that say so: the transitions every
  script of a room shares.
]]
-- @include "room"
-- @include "record"
-- @include "members"
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

local function load(user)
  local raw = rcall('HGET', roomKey, user)
  return raw and decode(raw)
end

-- The index of a room that passed INDEX_FROM members: each member's deadline.
local function buildIndex()
  local users, raws = readMembers()
  local args = {}
  for i, user in ipairs(users) do
    args[#args + 1] = packedDeadline(raws[i])
    args[#args + 1] = user
  end
  rcall('ZADD', indexKey, unpack(args))
end

-- The member's typing mark, if any, stops, announced with `reason`: returns the stop's seq and
-- epoch, or nothing.
local function endTyping(user, rec, reason)
  if rec.t then
    rec.t = nil
    return publish(user, 'typing-stop', reasonFragment(reason))
  end
end

-- Why a typing mark ends with its member's presence: its window may have passed already.
local function typingEnd(rec)
  return rec.t and rec.t + typingWindow <= now and 'expired' or 'left'
end

-- The member leaves: a typing mark never outlives presence, so it stops first. Returns the
-- leave's seq and epoch.
local function removeMember(user, rec, reason)
  endTyping(user, rec, typingEnd(rec))
  rcall('HDEL', roomKey, user)
  listLeft(user)
  local wasIndexed = indexed()
  if wasIndexed then
    rcall('ZREM', indexKey, user)
  end
  local seq, epoch = publish(user, 'leave', reasonFragment(reason) .. rosterFragment())
  local count = memberCount()
  if count == 0 then
    dropRoom()
  elseif wasIndexed and count <= INDEX_UNTIL then
    rcall('DEL', indexKey)
  end
  return seq, epoch
end

-- The member's last connection is gone (at `at`): its leave waits for the grace, if one is set
-- and not already over, and its typing stops at once. Returns the record in its grace, or nil
-- with the seq and epoch of the leave published.
local function lastConnectionGone(user, rec, reason, at)
  if leaveGrace == 0 or at + leaveGrace <= now then
    return nil, removeMember(user, rec, reason)
  end
  endTyping(user, rec, typingEnd(rec))
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
  local ids, beats = {}, {}
  for i = 1, #rec.ids do
    if rec.beats[i] + presenceWindow > now then
      ids[#ids + 1], beats[#beats + 1] = rec.ids[i], rec.beats[i]
    end
  end
  local dropped = #rec.ids - #ids
  if #ids == 0 then
    local stops = rec.t and 1 or 0
    local live = lastConnectionGone(user, rec, 'expired', lastSeen(rec) + presenceWindow)
    return live, dropped, live and 0 or 1, stops
  end
  rec.ids, rec.beats = ids, beats
  local stops = 0
  if rec.t and rec.t + typingWindow <= now then
    endTyping(user, rec, 'expired')
    stops = 1
  end
  save(user, rec)
  return rec, dropped, 0, stops
end

-- The member's live record, after anything overdue in it was expired and announced; nil if the
-- member is not (or no longer) present.
local function expireOverdue(user, rec)
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
