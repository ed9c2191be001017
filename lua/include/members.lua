--[[
  The room's members as a whole: how many, who (every field of the room hash but ''), its index
  of deadlines, and the room's teardown once empty.
]]
-- @include "room"
-- Rooms above INDEX_FROM members keep an index of deadlines; it goes at INDEX_UNTIL (hysteresis).
local INDEX_FROM, INDEX_UNTIL = 128, 64

local function memberCount()
  local n = rcall('HLEN', roomKey)
  return n > 0 and n - 1 or 0
end

local function indexed()
  return rcall('EXISTS', indexKey) == 1
end

-- The members' ids as this call last read them: a call announcing several leaves (a sweep) reads
-- them once, and keeps the list up to date with its own joins and leaves.
local memberList

-- Every member's id and record, in hash order; the list of ids is kept for later calls.
local function readMembers()
  local all, users, raws = rcall('HGETALL', roomKey), {}, {}
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      users[#users + 1], raws[#raws + 1] = all[i], all[i + 1]
    end
  end
  memberList = { unpack(users) }
  return users, raws
end

local function memberIds()
  if not memberList then
    memberList = {}
    for _, field in ipairs(rcall('HKEYS', roomKey)) do
      if field ~= '' then
        memberList[#memberList + 1] = field
      end
    end
  end
  return memberList
end

local function listJoined(user)
  if memberList then
    memberList[#memberList + 1] = user
  end
end

local function listLeft(user)
  for i, member in ipairs(memberList or {}) do
    if member == user then
      table.remove(memberList, i)
      return
    end
  end
end

-- The first `limit` members: by deadline from the index of a big room, else in hash order.
local function someMembers(limit)
  local count = memberCount()
  if limit == 0 or count == 0 then
    return {}, count
  end
  if count > limit and indexed() then
    return rcall('ZRANGE', indexKey, 0, limit - 1), count
  end
  return { unpack(memberIds(), 1, math.min(count, limit)) }, count
end

-- An emptied room goes with its keys and due entry; its next member starts a new chain of events.
local function dropRoom()
  rcall('DEL', roomKey, indexKey)
  rcall('ZREM', dueKey, room)
end
