--[[
  A room's members as a whole: how many (its meta's count), who (every field of the room hash
  but ''), its index of deadlines, and its teardown once empty.
]]
-- @include "bucket"
-- @include "meta"
-- @include "record"
-- Rooms above INDEX_FROM members keep an index of deadlines; it goes at INDEX_UNTIL (hysteresis).
local INDEX_FROM, INDEX_UNTIL = 128, 64

local function memberCount(r)
  local m = readMeta(r)
  return m and m[USERS] or 0
end

local function indexed(r)
  if r.indexed == nil then
    r.indexed = rcall('EXISTS', r.index) == 1
  end
  return r.indexed
end

-- Every member's id and record, in hash order; the ids are kept for later calls (r.members), and
-- kept up to date with this call's own joins and leaves (listJoined, listLeft).
local function readMembers(r)
  local all, users, raws = rcall('HGETALL', r.key), {}, {}
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      users[#users + 1], raws[#raws + 1] = all[i], all[i + 1]
    end
  end
  r.members = { unpack(users) }
  return users, raws
end

local function memberIds(r)
  if not r.members then
    r.members = {}
    for _, field in ipairs(rcall('HKEYS', r.key)) do
      if field ~= '' then
        r.members[#r.members + 1] = field
      end
    end
  end
  return r.members
end

local function listJoined(r, user)
  if r.members then
    r.members[#r.members + 1] = user
  end
end

local function listLeft(r, user)
  for i, member in ipairs(r.members or {}) do
    if member == user then
      table.remove(r.members, i)
      return
    end
  end
end

-- The first `limit` members: by deadline from the index of a big room, else in hash order.
local function someMembers(r, limit)
  local count = memberCount(r)
  if limit == 0 or count == 0 then
    return {}, count
  end
  if count > limit and indexed(r) then
    return rcall('ZRANGE', r.index, 0, limit - 1), count
  end
  return { unpack(memberIds(r), 1, math.min(count, limit)) }, count
end

-- The index of a room that passed INDEX_FROM members: each member's deadline.
local function buildIndex(r)
  local users, raws = readMembers(r)
  local args = {}
  for i, user in ipairs(users) do
    args[#args + 1] = packedDeadline(raws[i])
    args[#args + 1] = user
  end
  rcall('ZADD', r.index, unpack(args))
  r.indexed = true
end

local function dropIndex(r)
  rcall('DEL', r.index)
  r.indexed = false
end

-- An emptied room goes with its keys and due entry; its next member starts a new chain of events.
local function dropRoom(r)
  addToBucket(r, 'rooms', -1)
  rcall('DEL', r.key, r.index)
  rcall('ZREM', dueKey, r.name)
  r.meta, r.indexed = false, false
end
